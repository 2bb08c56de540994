"""Which process each repeat of a run was: a run taken in several processes names each one (its pid and
start, its place in the order they measured in, when it measured, the GPU's state then: measure/repeat.py),
so that a process dropped, duplicated or reordered is refused, and the count a page states is the count of
distinct processes."""
from __future__ import annotations

import json
import math

from ..model.procedure import STEADY_REPEATS


def taken(name: str, run: dict, settings: dict) -> tuple[dict, list, int, str] | None:
    """({field: result} of each process, their identities, how many processes the settings ask for, where the
    identities lie) of a run taken in several processes; None for a run taken in one."""
    if name == "steady":  # its processes are inside its result, a failed one kept with its reason
        result = run.get("result") or {}
        every, processes = result.get("repeats", []), result.get("processes")
        kept = [i for i, r in enumerate(every) if "error" not in r]
        named = None if not isinstance(processes, list) else [processes[i] if i < len(processes) else None for i in kept]
        return ({f"result.repeats[{i}]": every[i] for i in kept}, named, STEADY_REPEATS - (len(every) - len(kept)),
                "result.processes")
    if settings.get("repeats", 1) <= 1:
        return None
    results = {"result": run.get("result")} | {f"repeats[{i}]": r for i, r in enumerate(run.get("repeats", []))}
    return results, run.get("processes"), settings["repeats"] - len(run.get("repeat_errors", [])), "processes"


def lines(name: str, run: dict, settings: dict) -> list[str]:
    """What is wrong with the processes a run names; [] when each result is one distinct process's, as many as
    its settings ask for (less those that failed, each with its reason), measured one after another in order."""
    made = taken(name, run, settings)
    if made is None:
        return []
    results, processes, wanted, where = made
    if len(results) != wanted:
        return [f"{', '.join(results)} hold the results of {len(results)} processes where its settings ask for "
                f"{wanted} (with those whose failure it keeps)"]
    if not isinstance(processes, list) or len(processes) != len(results) or not all(isinstance(p, dict) for p in processes):
        return [f"{where} does not name the {len(results)} processes its results come from"]
    for i, p in enumerate(processes):
        if not (isinstance(p.get("pid"), int) and _finite(p.get("started")) and isinstance(p.get("measured"), list)
                and len(p["measured"]) == 2 and all(_finite(t) for t in p["measured"]) and p["measured"][0] <= p["measured"][1]):
            return [f"{where}[{i}] does not say which process it was (pid, started, measured)"]
    found = []
    seen = {}
    for i, p in enumerate(processes):
        if (p["pid"], p["started"]) in seen:
            found.append(f"{where}[{i}] is the process of {where}[{seen[p['pid'], p['started']]}] (pid {p['pid']})")
        seen.setdefault((p["pid"], p["started"]), i)
    if [p.get("order") for p in processes] != sorted(p.get("order") for p in processes if isinstance(p.get("order"), int)):
        found.append(f"{where} are not in the order they measured in ({[p.get('order') for p in processes]})")
    for i in range(1, len(processes)):
        if processes[i]["measured"][0] < processes[i - 1]["measured"][1]:
            found.append(f"{where}[{i}] measured before {where}[{i - 1}] had finished: the processes measure one at a time")
    texts = {field: json.dumps(r, sort_keys=True) for field, r in results.items()}
    for field, text in texts.items():
        same = next(f for f, t in texts.items() if t == text)
        if same != field:
            found.append(f"{field} is identical to {same}: one process's results counted twice")
    return found


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
