"""Claims about CUDA graph replays: how a replay looks in the profiler, what it saves one call, and where."""
from __future__ import annotations

from ...analysis import decide, summary
from ...model.stages import DEFAULT_SHAPE
from ...text import escape, us
from ..build import Build
from ..pieces.runs import measured, row_where
from ..words import count, listed
from .core import Flip, Statement, claim
from .edits import in_run, scale
from .wording import front, pct, times


def _launched_eagerly(s):
    s["ops"][0]["launch"] = "cudaLaunchKernel"


@claim("replay-in-profiler", reads=lambda eager, replay: [eager, replay],
       flip=lambda eager, replay: [
           Flip(f"{replay}.json", _launched_eagerly),
           Flip(f"{replay}.json", lambda s: s["cpu_ops"].append({"name": "aten::empty", "start_us": 0.0,
                                                                 "duration_us": 1.0, "depth": 1})),
           Flip(f"{replay}.json", lambda s: s["ops"][0].update(name="void other_kernel<1>()"))])
def replay_in_profiler(build: Build, eager="flash", replay="flash_graph") -> Statement:
    """What the profiler shows of one forward replayed from a CUDA graph, against the same forward launched op by
    op: the same kernels, every one launched by cudaGraphLaunch, and no operator on the CPU."""
    e, r = build.summary(eager), build.summary(replay)
    kernels = lambda s: [op["name"] for op in summary.kernels(s)]
    launches = sorted({op["launch"] for op in r["ops"]})
    same, one_launch, no_ops = kernels(e) == kernels(r), launches == ["cudaGraphLaunch"], not r["cpu_ops"]
    n = len(kernels(r))
    text = (f"{escape(r['title'])} runs the same {count(n)} kernel{'s' if n != 1 else ''} as {escape(e['title'])}, "
            f"launched by `cudaGraphLaunch`, and the profiler recorded "
            f"{len(r['cpu_ops'])} operators on the CPU inside its annotated range, against {len(e['cpu_ops'])} "
            f"launched op by op (the forward drawn of each, {len(r['forward_device_us_each'])} profiled)")
    lesson = ("A replay shows the same kernels, each tied to `cudaGraphLaunch` and to no `aten::` operator: the "
              "profiler no longer says which operator made a kernel")
    return Statement(text, same and one_launch and no_ops, f"same kernels: {same}, launches: {launches}, "
                     f"CPU operators: {[op['name'] for op in r['cpu_ops']]}", lesson=lesson)


@claim("graph-gains", reads=["run-graphs"],
       flip=Flip("run-graphs.json", in_run("graphs", lambda rows: [
           r["graph"].update(times_us=scale(r["graph"]["times_us"], 3.0)) for r in rows
           if r.get("path") == "SDPA flash" and r.get("shape") == list(DEFAULT_SHAPE) and "graph" in r])))
def graph_gains(build: Build) -> Statement:
    """What a CUDA graph replay saves one call (CUDA-event samples of the graphs run), at the post's shape
    and at the decode steps, and which path saves the most time per call where; each comparison by the one rule."""
    rows = [r for r in build.run("graphs") if "error" not in r]
    pick = lambda r, side: measured(build, "graphs", lambda res: row_where(where=r["where"], path=r["path"])(res)[side], "times_us")
    eager, graph = ({(r["where"], r["path"]): pick(r, side) for r in rows} for side in ("eager", "graph"))
    speedup = {k: decide.quotient(eager[k], graph[k]) for k in eager}
    places = list(dict.fromkeys(w for w, _ in eager))
    kv = {r["where"]: r.get("kv_len") for r in rows}
    saves = "; ".join(f"{us(eager[k].median - graph[k].median)} of {escape(k[1])}'s {eager[k].text(us)}, "
                      f"{pct(1 - graph[k].median / eager[k].median)}" for k in eager if k[0] == places[0])
    at = lambda w: [v.median for (w2, _), v in speedup.items() if w2 == w]
    replayed = lambda w: min((v for (w2, _), v in graph.items() if w2 == w), key=lambda v: v.median)
    first, last = places[1], places[-1]
    saved = {k: decide.difference(eager[k], graph[k]) for k in eager}  # time per call, process by process
    most = {}  # the path that saves the most time per call, with those not told apart from it -> where
    for w in places:
        top = front({p: v for (w2, p), v in saved.items() if w2 == w}, largest=True)
        most.setdefault(tuple(top), []).append(w)
    where = lambda ws: ("the post's shape and every decode step" if ws == places else
                        "every decode step" if ws == places[1:] else
                        listed(["the post's shape"] * (places[0] in ws) + [f"KV {kv[w]:,}" for w in ws if w != places[0]]))
    gains = lambda top: (f"{escape(top[0])} saves the most time per call"
                         + (f", not told apart from {listed([escape(p) for p in top[1:]])}" if len(top) > 1 else ""))
    text = (f"At {escape(places[0])} a replay saves {saves}, one call each (CUDA events: {next(iter(eager.values())).how}). "
            f"At a decode step "
            f"with a KV cache of {kv[first]:,} the replay is {times(min(at(first)))}–{times(max(at(first)))} faster per "
            f"call; at {kv[last]:,}, {times(min(at(last)))}–{times(max(at(last)))}: the fastest replayed call grows "
            f"from {replayed(first).text(us)} to {replayed(last).text(us)} as the KV cache grows. "
            + "; ".join(f"{'at' if i else 'At'} {where(ws)}, {gains(top)}" for i, (top, ws) in enumerate(most.items()))
            + " (the launches it no longer makes)")
    faster = all(decide.order(graph[k], eager[k]) == -1 for k in eager)
    grows = decide.order(replayed(first), replayed(last)) == -1
    share = [1 - graph[k].median / eager[k].median for k in eager if k[0] == places[0]]
    # the lesson's contrast: the least a replay gains at the shortest decode step beats the most at the post's shape
    least_short = min((v for (w, _), v in speedup.items() if w == first), key=lambda v: v.median)
    most_post = max((v for (w, _), v in speedup.items() if w == places[0]), key=lambda v: v.median)
    short_most = decide.order(least_short, most_post) == 1
    lesson = (f"A replay saves {pct(min(share))} to {pct(max(share))} of one call at the post's shape, and gains most "
              f"in decode with a short KV cache, where launches dominate")
    return Statement(text, len(places) > 2 and faster and grows and short_most, lesson=lesson,
                     rests_on=f"replay faster everywhere: {faster}, grows: {grows}, short decode gains most: {short_most}; "
                     f"{ {k: round(v.median, 2) for k, v in speedup.items()} }", outcome=str(most))
