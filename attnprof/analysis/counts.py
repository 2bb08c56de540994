"""How many samples and profiled forwards a record keeps, against what its settings and the measuring code say.

A page says "over 50 calls" or "of the 3 profiled" from the settings a record's key holds (or the counts its
rows state); a record keeping fewer samples or forwards than that is refused, so that no sample and no
forward can be dropped (or added) after the fact. The counts below are those the measuring code in
attnprof/measure/ takes (tests/test_counts.py holds them to its constants where it names them). Each check
returns lines `FIELD ...: what is wrong`; records.py puts the file and the fix around them. No torch here.
"""
from __future__ import annotations

from ..model.procedure import EVENT_REPS, SCHEDULE
from .walk import dicts

PROFILED = SCHEDULE["active"] * SCHEDULE["repeat"]  # forwards (or backwards) one profile keeps
STREAM = {"calls": 20, "reps": 30, "one_call_reps": 50}  # measure/timing.py: CALLS, REPS, ONE_CALL_REPS (a capture's)
# the timing run: measure/timing.py's CALLS, ROUNDS and ROUNDS * ONE_CALL_PER_ROUND (one queued run a round)
TIMING = {"calls": 20, "reps": 25, "one_call_reps": 50}
# the rounds a run's arms are measured in (measure/bench.py interleaved): a row keeps the samples of the rounds it
# kept (`rounds`) and counts those dropped at a throttled clock (`throttled`); together, these
ROUNDS = {"timing": TIMING["reps"], "backward": 10, "fastest": 5, "sweep": 5, "e2e": 5, "decode_step": 5, "graphs": 5, "ceilings": 5, "hardware": 5}
ADAPTIVE_REPS = (5, 50)  # measure/bench.py adaptive_reps(lo, hi): one-call samples of a row that states `reps`
BACK_TO_BACK_RUNS = 3  # measure/bench.py measure(): back_to_back_each(..., reps=3)
STEADY = {"repeats": 5, "calls": 200, "runs": 5}  # measure/steady.py: REPEATS, CALLS, RUNS
EACH = 5  # measure/sweep.py ceilings() and hardware(): back_to_back_each(..., reps=5)
GRAPHS = {"times_us": 50, "back_to_back_us_each": 5}  # measure/graphs.py: time_forward(reps=50), back_to_back_each(reps=5)
STREAM_SAMPLES = ("back_to_back_us", "enqueue_us", "enqueue_late_us", "graph_us")  # timing.stream's, STREAM["reps"] each


def kept(node: dict, total: int) -> int:
    """The samples of `total` a measurement keeps: all, or, taken in rounds (measure/bench.py interleaved),
    those of the rounds it kept, an equal share a round."""
    rounds, dropped = node.get("rounds"), node.get("throttled")
    if isinstance(rounds, int) and isinstance(dropped, int) and rounds + dropped > 0:
        return total // (rounds + dropped) * rounds
    return total


def _rounds(name: str, node: dict, where: str) -> list[str]:
    """A measurement taken in rounds kept and dropped as many as its run takes, neither count negative."""
    if "throttled" not in node or name not in ROUNDS:
        return []
    rounds, dropped = node.get("rounds", 0), node["throttled"]
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (rounds, dropped)):
        return [f"{where}.rounds {rounds!r} and throttled {dropped!r} are not counts of rounds"]
    if rounds + dropped != ROUNDS[name]:
        return [f"{where}.rounds {rounds} and throttled {dropped} make {rounds + dropped} rounds, but the run takes "
                f"{ROUNDS[name]} (measure/bench.py interleaved)"]
    return []


def _length(where: str, samples, wanted: int, said: str) -> list[str]:
    if isinstance(samples, list) and len(samples) != wanted:
        return [f"{where} keeps {len(samples)} samples, but {said} {wanted}"]
    return []


PER_FORWARD = ("ops_per_forward_each", "forward_device_us_each", "cpu_forward_us_each", "ops_per_backward_each",
               "ops_on_calling_thread_each", "backward_device_us_each", "cpu_backward_us_each", "forward_ops_each")


def _profiled(record: dict, where: str, wanted: int, said: str) -> list[str]:
    """Every per-forward list of a profile holds one entry per profiled forward (or backward)."""
    return [f"{where}{k} has {len(record[k])} entries, but {said} {wanted} profiled"
            for k in PER_FORWARD if isinstance(record.get(k), list) and len(record[k]) != wanted]


def summary_lines(summary: dict) -> list[str]:
    """A profiled capture (a stage's, a backward's, a reader's, a two-GPU record's ranks): as many CUDA-event
    samples as its settings' `event_reps`, one entry per profiled forward as its settings' schedule keeps,
    and timing.stream's samples."""
    settings = summary.get("settings") or {}
    schedule = settings.get("schedule") or SCHEDULE
    forwards = schedule.get("active", 0) * schedule.get("repeat", 1)
    said = "its settings' schedule keeps"
    found = _length("event_times_us", summary.get("event_times_us"), settings.get("event_reps", EVENT_REPS),
                    "its settings' event_reps is")
    found += _profiled(summary, "", forwards, said)
    for r in summary.get("ranks", []):
        found += _profiled(r, f"ranks[{r.get('rank')}].", forwards, said)
    timing = summary.get("timing") if isinstance(summary.get("timing"), dict) else {}
    found += [line for k in STREAM_SAMPLES for line in _length(f"timing.{k}", timing.get(k), STREAM["reps"],
                                                                 "measure/timing.py's REPS is")]
    return found


def run_lines(name: str, run: dict) -> list[str]:
    """A measurement run, every process: the samples each row keeps, against the counts it states (`reps`,
    `calls`, `one_call_reps`) and those the measuring code takes."""
    found = []

    def check(node, where):
        found.extend(_rounds(name, node, where))
        if "reps" in node and "times_us" in node:  # bench.measure: adaptive one-call samples, 3 back-to-back runs
            lo, hi = ADAPTIVE_REPS  # (in rounds: one back-to-back run and an equal share of the one-call samples a round)
            if not (isinstance(node["reps"], int) and lo <= node["reps"] <= hi):
                found.append(f"{where}.reps {node['reps']!r} is not between {lo} and {hi} (measure/bench.py)")
            else:
                found.extend(_length(f"{where}.times_us", node["times_us"], kept(node, node["reps"]),
                                     "its reps and rounds say"))
            found.extend(_length(f"{where}.back_to_back_us_each", node.get("back_to_back_us_each"),
                                 node["rounds"] if "rounds" in node else BACK_TO_BACK_RUNS, "measure/bench.py takes"))
        elif "back_to_back_calls" in node and "rounds" in node:  # bench.together without one-call samples (the sweep)
            found.extend(_length(f"{where}.back_to_back_us_each", node.get("back_to_back_us_each"), node["rounds"],
                                 "measure/bench.py takes"))
    results = [("result", run.get("result"))] + [(f"repeats[{i}]", r) for i, r in enumerate(run.get("repeats", []))]
    for where, result in results:
        for at, node in dicts(result, where):
            check(node, at)
        found += _run_specific(name, result, where)
    return found


def _run_specific(name: str, result, where: str) -> list[str]:
    found = []
    if name == "timing" and isinstance(result, dict):
        found += [f"{where}.{k} {result.get(k)!r}, but measure/timing.py takes {v}" for k, v in TIMING.items()
                  if result.get(k) != v]
        for i, r in enumerate(result.get("rows", [])):
            at = f"{where}.rows[{i}]"
            found += [line for k in ("one_call_us", "one_call_wall_us")
                      for line in _length(f"{at}.{k}", r.get(k), kept(r, TIMING["one_call_reps"]),
                                          "measure/timing.py's rounds (and those it kept) give")]
            found += [line for k in STREAM_SAMPLES for line in _length(f"{at}.{k}", r.get(k), kept(r, TIMING["reps"]),
                                                                       "measure/timing.py's rounds (and those it kept) give")]
            found += [line for k, v in (r.get("profiled") or {}).items()
                      for line in _length(f"{at}.profiled.{k}", v, PROFILED, "the procedure profiles")]
    elif name == "decode_step" and isinstance(result, list):
        found += [line for i, r in enumerate(result) for k in STREAM_SAMPLES
                  for line in _length(f"{where}[{i}].stream.{k}", (r.get("stream") or {}).get(k), STREAM["reps"],
                                      "measure/timing.py's REPS is")]
    elif name == "backward" and isinstance(result, dict):
        for i, r in enumerate(result.get("rows", [])):
            found += _length(f"{where}.rows[{i}].event_times_us", r.get("event_times_us"), kept(r, EVENT_REPS),
                             "procedure.EVENT_REPS (and the rounds kept) give")
            found += _length(f"{where}.rows[{i}].backward_device_us_each", r.get("backward_device_us_each"), PROFILED,
                             "the procedure profiles")
    elif name in ("ceilings", "hardware") and isinstance(result, dict):
        found += [line for k, v in result.items() if k.endswith("_us_each")
                  for line in _length(f"{where}.{k}", v, kept(result, EACH), "measure/sweep.py takes")]
    elif name == "graphs" and isinstance(result, list):
        found += [line for i, r in enumerate(result) for part in ("eager", "graph") for k, n in GRAPHS.items()
                  for line in _length(f"{where}[{i}].{part}.{k}", (r.get(part) or {}).get(k), kept(r.get(part) or {}, n),
                                      "measure/graphs.py takes")]
    elif name == "steady" and isinstance(result, dict):
        repeats = result.get("repeats", [])
        if len(repeats) != STEADY["repeats"]:
            found.append(f"{where}.repeats has {len(repeats)} entries, but measure/steady.py takes {STEADY['repeats']}")
        for i, r in enumerate(repeats):
            if "error" in r:
                continue
            found += [line for k in ("back_to_back_us_each", "matmul_us_each")
                      for line in _length(f"{where}.repeats[{i}].{k}", r.get(k), STEADY["runs"], "measure/steady.py takes")]
            if r.get("back_to_back_calls") != STEADY["calls"]:
                found.append(f"{where}.repeats[{i}].back_to_back_calls {r.get('back_to_back_calls')!r}, but "
                             f"measure/steady.py queues {STEADY['calls']}")
    return found
