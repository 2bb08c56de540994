"""Timing and memory of a forward, on a GPU with CUDA events or on a CPU with a wall clock.

Every number here is a median over repeated runs after warm-up. `time_forward` times each call on
its own (launch gaps included); `time_back_to_back` times a run of calls and divides, which is the
throughput a stream of forwards gets. An out-of-memory forward is reported, never raised.
"""
from __future__ import annotations

import contextlib
import random
import statistics
import time

import torch

from . import clock
from ..model.procedure import THROTTLE, THROTTLE_RECOVERY_S  # NVBench's default threshold (75 %) and pause
from ..text import first_line


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _elapsed_us(run) -> float:
    """Microseconds of run(): between CUDA events on the stream, or on the wall clock without a GPU."""
    if torch.cuda.is_available():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0
    t0 = time.perf_counter()
    run()
    return (time.perf_counter() - t0) * 1e6


def time_forward(forward, reps=50, warmup=5) -> list[float]:
    """Microseconds of each of `reps` calls, after `warmup` calls."""
    for _ in range(warmup):
        forward()
    sync()
    return [_elapsed_us(forward) for _ in range(reps)]


def back_to_back_each(forward, calls=20, reps=5) -> list[float]:
    """Microseconds per call in each of `reps` runs of `calls` forwards queued back to back."""
    forward()
    sync()

    def run():
        for _ in range(calls):
            forward()
    return [_elapsed_us(run) / calls for _ in range(reps)]


def time_back_to_back(forward, calls=20, reps=5) -> float:
    """Median microseconds per call when `calls` forwards are queued back to back."""
    return statistics.median(back_to_back_each(forward, calls, reps))


def adaptive_reps(forward, budget_us=300_000.0, lo=5, hi=50) -> int:
    """As many timed calls as fit a time budget, from one timed call."""
    (t,) = time_forward(forward, reps=1, warmup=1)
    return int(max(lo, min(hi, budget_us / max(t, 1.0))))


def peak_extra_bytes(forward) -> int | None:
    """Peak memory a forward allocates beyond what was live before it (output included); GPU only."""
    if not torch.cuda.is_available():
        return None
    sync()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = forward()
    sync()
    del out
    return torch.cuda.max_memory_allocated() - before


def measure(forward, budget_us=300_000.0, calls=5) -> dict:
    """Median time per call, back-to-back time (median over 3 runs of `calls` queued forwards), their
    samples, and peak memory of one forward; OOM as a result."""
    try:
        with torch.no_grad():
            reps = adaptive_reps(forward, budget_us)
            times = time_forward(forward, reps=reps, warmup=2)
            each = back_to_back_each(forward, calls=calls, reps=3)
            return {"median_us": statistics.median(times), "times_us": times,
                    "back_to_back_us": statistics.median(each), "back_to_back_us_each": each,
                    "back_to_back_calls": calls, "reps": reps, "peak_extra_bytes": peak_extra_bytes(forward)}
    except torch.OutOfMemoryError:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return {"oom": True}


NO_CLOCKS = {"sm_mhz_min": None, "sm_mhz_median": None, "sm_mhz_max": None, "sm_mhz_limit": None,
             "temperature_c_max": None, "power_w_max": None, "throttle_reasons": None}


def clocks(states: list, rounds: list | None = None) -> dict:
    """The GPU's state over the kept rounds (clock.read's readings): SM clock min, median, max and limit (MHz),
    highest temperature (°C) and power (W), throttle reasons OR'd; None where NVML could not say. With `rounds`
    (each round's readings before and after), each round's lower SM clock (`sm_mhz_each`), where NVML gave all."""
    def seen(key):
        return [s[key] for s in states if s and s.get(key) is not None]
    sm, reasons = seen("sm_mhz"), seen("throttle_reasons")
    top = lambda key: max(seen(key), default=None)
    each = [min((s or {}).get("sm_mhz") or 0 for s in pair) for pair in rounds or []]
    return {**NO_CLOCKS, **({"sm_mhz_min": min(sm), "sm_mhz_median": statistics.median(sm), "sm_mhz_max": max(sm)}
                           if sm else {}),
            "sm_mhz_limit": top("max_sm_mhz"), "temperature_c_max": top("temperature_c"), "power_w_max": top("power_w"),
            "throttle_reasons": _or(reasons) if reasons else None, **({"sm_mhz_each": each} if each and all(each) else {})}


def _or(bits):
    out = 0
    for b in bits:
        out |= int(b)
    return out


def throttled(state) -> bool:
    """Whether a reading's SM clock is below THROTTLE of the GPU's maximum (False where NVML cannot say)."""
    sm, top = (state or {}).get("sm_mhz"), (state or {}).get("max_sm_mhz")
    return bool(sm is not None and top and sm < THROTTLE * top)


def interleaved(arms: dict, rounds: int, seed: int | None = None, reader=None, warm: bool = True,
                drop: bool = True) -> dict:
    """Prepared arms (name: a function measuring it once, giving {field: samples or one sample}) measured in
    `rounds` rounds, each once a round in an order shuffled anew (random.Random(seed), a fresh seed recorded),
    so drift falls on every arm alike. The GPU's state is read before and after each round (`reader`). With
    `drop`, a round whose SM clock fell below THROTTLE of the maximum is dropped for every arm and counted, and
    the next waits THROTTLE_RECOVERY_S, as NVBench does; unless every round fell, for a run never fails for its
    clock. Without `drop` (the ceilings, which compare no rounds) every round is kept. With `warm`, a
    dropped first round makes the first kept one follow work, not the idle of preparation. Returns {name:
    {field: kept samples, ..., "rounds", "throttled", "clocks", "seed"}}; an arm raising RuntimeError (out of
    memory included) is {"error": why}."""
    reader = reader or clock.read
    seed = random.SystemRandom().randrange(2**32) if seed is None else seed
    rng, live, failed = random.Random(seed), dict(arms), {}
    taken = []  # each round's readings before and after it, its samples by arm, and whether its clock ran low

    def once(name):
        try:
            return live[name]()
        except RuntimeError as e:  # torch.OutOfMemoryError included
            failed[name] = f"{type(e).__name__}: {first_line(e)}"[:300]
            del live[name]
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            return None
    if warm:
        for name in list(live):
            once(name)
    for _ in range(rounds):
        before = reader()
        order = list(arms)
        rng.shuffle(order)  # every arm's name, failed or not: the order of a round follows from the seed alone
        got = {name: out for name in order if name in live and (out := once(name)) is not None}
        after = reader()
        low = drop and (throttled(before) or throttled(after))
        taken.append(((before, after), got, low))
        if low:
            time.sleep(THROTTLE_RECOVERY_S)
    kept = [t for t in taken if not t[2] or all(low for *_, low in taken)]
    samples = {name: {} for name in arms}
    for _, got, _ in kept:
        for name, out in got.items():
            for field, xs in out.items():
                samples[name].setdefault(field, []).extend(xs if isinstance(xs, list) else [xs])
    readings = [pair for pair, *_ in kept]
    summary = {"rounds": len(kept), "throttled": rounds - len(kept), "seed": seed,
               "clocks": clocks([s for pair in readings for s in pair], readings)}
    return {name: {"error": failed[name]} if name in failed else {**samples[name], **summary} for name in arms}


def settle(run, reader=None, max_s: float = 3.0, step_s: float = 0.1) -> dict:
    """Run `run` in steps of `step_s` until the SM clock stops falling (two readings no lower), at most `max_s`
    (one step without a clock): {"settle_s": seconds spent, "settled": whether it stopped in time}."""
    reader = reader or clock.read
    start, last, steady = time.perf_counter(), None, 0
    while True:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < step_s:
            run()
            sync()
        sm = (reader() or {}).get("sm_mhz")
        spent = time.perf_counter() - start
        if sm is None:
            return {"settle_s": spent, "settled": False}
        steady = steady + 1 if last is not None and sm >= last else 0
        last = sm
        if steady >= 2 or spent >= max_s:
            return {"settle_s": spent, "settled": steady >= 2}


TOGETHER_ROUNDS = 5  # bench.together's rounds: one back-to-back run and a fifth of the one-call samples each


def _arm(forward, context, chunk: int, calls: int):
    """One round's samples of one prepared forward, under `context`: `chunk` one-call times (none for 0) and
    one back-to-back run of `calls` forwards (as `measure` takes them, a round at a time)."""
    def once() -> dict:
        with context(), torch.no_grad():
            return ({"times_us": time_forward(forward, reps=chunk, warmup=1)} if chunk else {}) | {
                "back_to_back_us_each": back_to_back_each(forward, calls=calls, reps=1)}
    return once


def together(forwards: dict, calls: int = 5, rounds: int = TOGETHER_ROUNDS, seed: int | None = None,
             contexts: dict | None = None, budget_us: float = 300_000.0, one_call: bool = True) -> dict:
    """Named forwards measured as `measure` does, but `interleaved`, so the paths a page compares are paired:
    one-call samples fitting the budget (none without `one_call`), a back-to-back run of `calls` a round, then
    one forward's peak memory. `contexts`: a name's context manager factory (a stage's backend pin). Returns
    {name: measure's fields and interleaved's}; out of memory is {"oom": True}, another failure {"error": why}."""
    context = lambda name: (contexts or {}).get(name) or contextlib.nullcontext
    out, arms, reps = {}, {}, {}
    for name, forward in forwards.items():
        try:
            with context(name)(), torch.no_grad():
                chunk = max(1, adaptive_reps(forward, budget_us) // rounds) if one_call else 0
        except RuntimeError as e:  # torch.OutOfMemoryError included
            out[name] = {"error": f"{type(e).__name__}: {first_line(e)}"[:300]}
            continue
        reps[name], arms[name] = chunk * rounds, _arm(forward, context(name), chunk, calls)
    # no warm round: every forward just ran (adaptive_reps); without one-call samples (the sweep) the first
    # round may run at a clock an idle GPU left high, for every arm alike
    out |= interleaved(arms, rounds, seed=seed, warm=False) if arms else {}
    for name in arms:
        m = out[name]
        if "error" in m:
            continue
        try:
            with context(name)(), torch.no_grad():
                peak = peak_extra_bytes(forwards[name])
        except RuntimeError as e:  # torch.OutOfMemoryError included: this path's result, not the others'
            out[name] = {"error": f"{type(e).__name__}: {first_line(e)}"[:300]}
            continue
        one = {"median_us": statistics.median(m["times_us"])} if one_call else {}
        out[name] = {**one, **m, "back_to_back_us": statistics.median(m["back_to_back_us_each"]),
                     "back_to_back_calls": calls, **({"reps": reps[name]} if one_call else {}), "peak_extra_bytes": peak}
    for name, m in out.items():
        if m.get("error", "").startswith("OutOfMemoryError"):
            out[name] = {"oom": True}
    return {name: out[name] for name in forwards}
