"""Claims that rank or compare stages by the one rule (analysis/decide.py): who is fastest, who is between,
who saves CPU, which layout."""
from __future__ import annotations

from ...analysis import decide
from ...model import names
from ...model.stages import DEFAULT_SHAPE, STAGES
from ...text import escape, shape as shape_text, us
from ..build import Build, row
from ..words import DEVICE, MEDIAN, listed, per_process, plain_title, short, within
from .core import ADAPTS, Flip, Statement, claim
from .edits import each, in_run, scale, scaled_row, setting
from .wording import apart, front, pct, times
from ..pieces.runs import measured, row_where
from ..pieces.timing import clock_of, timed_range


def _same_enqueue(stage: str, against: str):
    """The timing run with `stage`'s CPU enqueue samples made `against`'s, in every process: nothing to tell apart."""
    def edit(result):
        a, b = (row(result["rows"], stage=s, shape=list(DEFAULT_SHAPE)) for s in (stage, against))
        a["enqueue_us"] = list(b["enqueue_us"])
    return in_run("timing", edit)


@claim("cpu-saving", reads=["run-timing"],
       flip=lambda stage, against: [
           Flip("run-timing.json", scaled_row("timing", "enqueue_us", 10.0, stage=against, shape=list(DEFAULT_SHAPE)),
                ADAPTS, "below"),  # a saving
           Flip("run-timing.json", _same_enqueue(stage, against), ADAPTS, "not told apart from"),
           Flip("run-timing.json", scaled_row("timing", "enqueue_us", 10.0, stage=stage, shape=list(DEFAULT_SHAPE)))])
def cpu_saving(build: Build, stage, against) -> Statement:
    """Whether a stage's forward takes less of the CPU's time to enqueue than another's: the timing run's CPU
    enqueue (unprofiled), the two measured in turns in each process and compared process by process. It
    may be less or not told apart; decidedly more contradicts the page (dropping a copy adds no CPU work)."""
    ra, rb = (timed_range(build, s, DEFAULT_SHAPE, "enqueue_us") for s in (stage, against))
    place = decide.order(ra, rb)
    text = (f"Unprofiled, the forward takes {ra.text(us)} of CPU time to enqueue here against {rb.text(us)} for "
            f"{short(against)} (CPU enqueue per forward, {ra.how}, the two measured in turns, "
            f"{clock_of(build, DEFAULT_SHAPE)})")
    text += {-1: f": less in every process, by {per_process(ra, rb)}",
             0: f": not told apart, {within(ra, rb)}, so the timing run cannot say whether writing the mask in place "
                f"saves CPU time",
             1: f": more in every process, by {per_process(ra, rb)}"}[place]
    lesson = (f"The {short(stage)} forward's CPU time to enqueue, {us(ra.median)} against {us(rb.median)} for {short(against)}, is "
              + {-1: "less: writing the mask in place saves CPU work too", 0: "not told apart, so no CPU saving shows",
                 1: "more"}[place])
    return Statement(text, place <= 0, f"{ra} against {rb}", apart(ra, rb), lesson)


@claim("cudnn-fastest", reads=["run-timing", "math", "efficient", "flash", "cudnn"],
       flip=[Flip("run-timing.json", scaled_row("timing", "one_call_us", 3.0, stage="cudnn", shape=list(DEFAULT_SHAPE))),
             Flip("cudnn.json", each("forward_device_us", 3.0))])  # the capture's median no longer the fastest
def cudnn_fastest(build: Build) -> Statement:
    """cuDNN is the fastest SDPA backend at the post's shape, by device time and by one call, told apart
    from every other by the one rule over the timing run's separate processes."""
    backends = ("math", "efficient", "flash", "cudnn")
    device = {b: timed_range(build, b, DEFAULT_SHAPE, "device_us") for b in backends}
    event = {b: timed_range(build, b, DEFAULT_SHAPE, "one_call_us") for b in backends}
    # cuDNN against the fastest of the others, whether or not cuDNN leads
    rival, rival_event = (min((b for b in backends if b != "cudnn"), key=lambda b: rows[b].median)
                          for rows in (device, event))
    first = [decide.ranking(rows)[0] for rows in (device, event)]
    by_call = (f"and by one call's CUDA-event median too ({event['cudnn'].text(us)} against {short(rival_event)}'s "
               f"{event[rival_event].text(us)})" if first[1] == ["cudnn"] else
               f"though by one call's CUDA-event median it is not told apart from "
               f"{' and '.join(short(b) + chr(39) + 's' for b in first[1] if b != 'cudnn')} ({event['cudnn'].text(us)} "
               f"against {event[rival_event].text(us)}, {within(event['cudnn'], event[rival_event])})")
    text = (f"the fastest SDPA backend by device time in the timing run ({device['cudnn'].text(us)} against "
            f"{short(rival)}'s {device[rival].text(us)}), {by_call}; {device['cudnn'].how}, "
            f"{clock_of(build, DEFAULT_SHAPE)}")
    captured = {b: build.summary(b)["forward_device_us"] for b in ("cudnn", rival)}  # as the tables state them
    said = {b: build.number(b, DEVICE, MEDIAN, us(x)) for b, x in captured.items()}
    lesson = (f"the fastest SDPA backend at the post's shape: {said['cudnn']} of device time against {short(rival)}'s "
              f"{said[rival]}")
    return Statement(text, first[0] == ["cudnn"] and "cudnn" in first[1] and captured["cudnn"] < captured[rival],
                     lesson=lesson,
                     rests_on=f"first by device {first[0]}, by one call {first[1]}")


@claim("between", reads=lambda stage, slower, faster: [stage, slower, faster],
       flip=lambda stage, slower, faster: Flip(f"{stage}.json", each("forward_device_us", 10.0)))
def between(build: Build, stage, slower, faster) -> Statement:
    """A stage's device time per forward between two others' (each capture's profiled forwards), told apart from
    both by the one rule."""
    a, b, c = (decide.samples(build.summary(s)["forward_device_us_each"], decide.DEVICE) for s in (stage, slower, faster))
    text = (f"{a.text(us)} of device time per forward (profiler, median and p10–p90 of the capture's profiled "
            f"forwards, {shape_text(build.summary(stage)['shape'])}) against {b.text(us)} for {short(slower)} and "
            f"{c.text(us)} for {short(faster)}: {times(b.median / a.median)} faster than the first, "
            f"{times(a.median / c.median)} slower than the second")
    lesson = (f"{times(b.median / a.median)} faster than {short(slower)} and {times(a.median / c.median)} slower than "
              f"{short(faster)}, by device time")
    return Statement(text, decide.order(c, a) == -1 and decide.order(a, b) == -1, f"{a} between {c} and {b}",
                     lesson=lesson)


@claim("kernel-ahead", reads=lambda a, b: [a, b],
       flip=lambda a, b: [Flip(f"{a}.json", each("forward_device_us", 1.5), ADAPTS),
                          Flip(f"{b}.json", setting(shape=list(DEFAULT_SHAPE)))])  # then the two are not alike
def kernel_ahead(build: Build, a, b) -> Statement:
    """Which of two captures' forwards takes less device time (profiler, the one rule), and by how much: a
    comparison that holds only between forwards of one shape and dtype, which the sentence names once."""
    ra, rb = (decide.samples(build.summary(r)["forward_device_us_each"], decide.DEVICE) for r in (a, b))
    name = lambda r: short(names.parse_record(r)[0])
    how = (f"profiler, median and p10–p90 of {len(build.summary(a)['forward_device_us_each'])} profiled forwards, "
           f"{shape_text(build.summary(a)['shape'])}")
    place = decide.order(ra, rb)
    if place == 0:
        text = (f"{name(a)}'s and {name(b)}'s forwards are not told apart by device time: {ra.text(us)} against "
                f"{rb.text(us)} ({how}), {within(ra, rb)}")
    else:
        (first, lo), (second, hi) = sorted(((a, ra), (b, rb)), key=lambda x: x[1].median)
        text = (f"{name(first)}'s forward takes {lo.text(us)} of device time against {hi.text(us)} for "
                f"{name(second)} ({how}), {pct(1 - lo.median / hi.median)} less")
    alike = all(build.summary(a)[k] == build.summary(b)[k] for k in ("shape", "dtype"))
    lesson = (f"{name(a)}'s and {name(b)}'s forwards are not told apart by device time" if place == 0 else
              f"{name(first)}'s forward takes {us(lo.median)} of device time against {us(hi.median)} for {name(second)}")
    return Statement(text, alike and ra.n > 1 and rb.n > 1, f"{ra} against {rb}; alike: {alike}", apart(ra, rb), lesson)


@claim("cpu-rank", reads=["run-timing"],
       flip=lambda stage: Flip("run-timing.json", in_run("timing", lambda r: [
           x.update(enqueue_us=scale(x["enqueue_us"], 10.0)) for x in r["rows"]
           if x["stage"] == stage and tuple(x["shape"]) == DEFAULT_SHAPE]), ADAPTS, "the most expensive of these here"))
def cpu_rank(build: Build, stage, *others) -> Statement:
    """Where a stage's CPU cost per forward ranks among others at the post's shape, by the timing run's
    unprofiled CPU enqueue: above or below each, or not told apart from it (the one rule)."""
    enqueue = {s: timed_range(build, s, DEFAULT_SHAPE, "enqueue_us") for s in (stage, *others)}
    mine = enqueue[stage]
    words = {"above": [], "below": [], "not told apart from": []}
    tied = [short(o) for o in others if apart(mine, enqueue[o]) == "not told apart from"]
    for other in others:
        side = apart(mine, enqueue[other])
        by = (f" ({within(mine, enqueue[other])})" if side == "not told apart from" else
              f" ({per_process(mine, enqueue[other])} {'more' if side == 'above' else 'less'} in each process)"
              if decide.paired(mine, enqueue[other]) else "")
        words[side].append(f"{short(other)}'s {enqueue[other].text(us)}{by}")
    said = "; ".join(f"{w} {' and '.join(v)}" for w, v in words.items() if v)
    n = len(others)
    rank = ("the most expensive of these here" if len(words["above"]) == n
            else "the cheapest of these here" if len(words["below"]) == n
            else "not the most expensive of these here" if words["below"]
            else "this run cannot rank it among them" if len(words["not told apart from"]) == n
            else f"tied with {' and '.join(tied)} as the most expensive of these here")
    shown = rank.replace("of these here", f"among {listed([short(s) for s in (stage, *others)])}")
    text = (f"by unprofiled CPU enqueue (host clock, back-to-back calls, per forward, {mine.how}, "
            f"{shape_text(DEFAULT_SHAPE)}, {clock_of(build, DEFAULT_SHAPE)}), {short(stage)} takes {mine.text(us)}: "
            f"{said}, so {shown}")
    # the ranking's own groups bear out an outright first or last place
    groups = decide.ranking(enqueue)
    holds = {"the most expensive of these here": groups[-1] == [stage],
             "the cheapest of these here": groups[0] == [stage]}.get(rank, True)
    lesson = f"without the profiler, {short(stage)}'s CPU enqueue of {us(mine.median)} per forward is {shown}"
    return Statement(text, holds, f"{ {k: round(v.median, 1) for k, v in enqueue.items()} }, groups {groups}", rank,
                     lesson)


@claim("profiled-cpu", reads=lambda *stages: list(stages),
       flip=lambda *stages: Flip(f"{stages[0]}.json", each("cpu_forward_us", 10.0), ADAPTS))
def profiled_cpu(build: Build, *stages) -> Statement:
    """How stages rank by the profiler's CPU time per forward (each capture's profiled forwards, the one rule with
    CPU time's margins): the column the tables give, which the profiler's own cost per op inflates."""
    cpu = {s: decide.samples(build.summary(s)["cpu_forward_us_each"], decide.CPU) for s in stages}
    groups = decide.ranking(cpu)
    names = lambda group: listed([short(s) for s in group])
    lesson = ("by the profiler's CPU time per forward, " + (f"{names(stages)} are not told apart" if len(groups) == 1
              else ", then ".join(names(g) for g in groups) + ", cheapest first"))
    text = (", ".join(f"{short(s)} {cpu[s].text(us)}" for s in stages) + " of CPU time per forward (profiler, median "
            f"and p10–p90 of each capture's profiled forwards, {shape_text(DEFAULT_SHAPE)}); two captures' medians "
            f"are told apart only beyond {decide.margin(*list(cpu.values())[:2]) + 1:.1f}× of each other, as far as "
            "one forward's profiled CPU time has moved between processes")
    return Statement(text, True, f"groups {groups}", str(groups), lesson)


@claim("layout-gap", reads=["run-fastest"],
       flip=lambda stage: [Flip("run-fastest.json", in_run("fastest", _slower_rows(stage, "BHSD", 0.85)), ADAPTS),
                           Flip("run-fastest.json", in_run("fastest", _slower_rows(stage, "BHSD", 3.0)))])
def layout_gap(build: Build, stage) -> Statement:
    """A stage is the fastest forward stored either way in the fastest-forward run (told apart from the
    next, the one rule), and its two layouts against each other."""
    rows = [r for r in build.run("fastest") if r.get("back_to_back_us_each")]
    at = {(r["path"], r["layout"]): measured(build, "fastest", row_where(path=r["path"], layout=r["layout"])) for r in rows}
    fastest, nexts = True, []
    for layout in ("BSHD", "BHSD"):
        fastest &= front({p: v for (p, l), v in at.items() if l == layout}) == [stage]
        runner = min(((p, v) for (p, l), v in at.items() if l == layout and p != stage), key=lambda pv: pv[1].median)
        nexts.append(f"{at[stage, layout].text(us)} against {short(runner[0])}'s {runner[1].text(us)} stored {layout}")
    a, b = at[stage, "BSHD"], at[stage, "BHSD"]
    text = (f"In both, {short(stage)} is the fastest forward here ({'; '.join(nexts)}; per forward back to back, "
            f"{a.how}). ")
    if decide.order(a, b) == 0:
        text += (f"Its own two rows are not told apart ({pct(abs(a.median / b.median - 1))} between the medians, "
                 f"{within(a, b)}), so "
                 f"this run cannot separate a layout effect from run-to-run variation")
    else:
        (fast, rf), (slow, rs) = sorted((("BSHD", a), ("BHSD", b)), key=lambda x: x[1].median)
        text += (f"Stored {fast} it runs {pct(1 - rf.median / rs.median)} faster than stored {slow}, told apart by "
                 f"more than the spread")
    lesson = f"{short(stage)} is the fastest forward stored either way" + (
        "; its two layouts are not told apart" if decide.order(a, b) == 0 else
        f"; stored {min((('BSHD', a), ('BHSD', b)), key=lambda x: x[1].median)[0]} it runs "
        f"{pct(1 - min(a.median, b.median) / max(a.median, b.median))} faster")
    return Statement(text, fastest, "; ".join(nexts), apart(a, b), lesson)


def _slower_rows(stage: str, layout: str, factor: float):
    def edit(rows):
        for r in rows:
            if r["path"] == stage and r["layout"] == layout and r.get("back_to_back_us_each"):
                r["back_to_back_us_each"] = scale(r["back_to_back_us_each"], factor)
    return edit


def _namer(build: Build, records):
    """Each record's name in a sentence: a stage's short name; a reader's capture by its title, less the part
    before a comma that every reader's capture named here shares ("Sliding window, SDPA with a boolean mask")."""
    own = {r: plain_title(build.summary(r)) for r in records if r not in STAGES}
    heads = {t.split(", ", 1)[0] for t in own.values() if ", " in t}
    shared = heads.pop() + ", " if len(heads) == 1 and all(", " in t for t in own.values()) and len(own) > 1 else ""
    return lambda r: short(r) if r in STAGES else escape(own[r].removeprefix(shared))


@claim("no-faster", reads=lambda a, b: [a, b], flip=lambda a: Flip(f"{a}.json", each("forward_device_us", 0.3)))
def no_faster(build: Build, a, b) -> Statement:
    """`a`'s forward takes no less device time than `b`'s (profiler, the one rule over each one's profiled
    forwards): the same, not told apart, or more."""
    ta, tb = (decide.samples(build.summary(r)["forward_device_us_each"], decide.DEVICE) for r in (a, b))
    _name = _namer(build, [a, b])
    side = decide.order(ta, tb)
    verdict = {1: "slower", 0: "not told apart", -1: "faster"}[side]
    text = (f"{_name(a)}'s forward takes {ta.text(us)} of device time, {_name(b)}'s {tb.text(us)}: {verdict} "
            f"(profiler, median and p10–p90 of each capture's profiled forwards)")
    return Statement(text, side != -1, f"{ta.median:.1f} and {tb.median:.1f} µs: {verdict}",
                     lesson=f"no faster than {_name(b)}'s forward")


@claim("least-device", reads=lambda leader, others: [leader, *others],
       flip=lambda leader, others: [Flip(f"{leader}.json", each("forward_device_us", 3.0)),  # another leads
                                    Flip(f"{others[0]}.json", setting(shape=[1, 1, 64, 64]))])  # another shape
def least_device(build: Build, leader, *others) -> Statement:
    """`leader`'s forward takes the least device time of these captures (profiler, the one rule over each one's
    profiled forwards), told apart from every other: a ranking that holds only between forwards of one shape and
    dtype, each with profiled forwards enough for a range."""
    times = {r: decide.samples(build.summary(r)["forward_device_us_each"], decide.DEVICE) for r in (leader, *others)}
    runner = min(others, key=lambda r: times[r].median)
    _name = _namer(build, times)
    said = {r: build.number(r, DEVICE, MEDIAN, us(build.summary(r)["forward_device_us"])) for r in (leader, runner)}
    alike = len({(tuple(build.summary(r)["shape"]), build.summary(r)["dtype"]) for r in times}) == 1
    first = decide.ranking(times)[0]
    rest = [f"{_name(r)}'s {times[r].text(us)}" for r in sorted(others, key=lambda r: times[r].median) if r != runner]
    text = (f"{_name(leader)}'s forward takes {times[leader].text(us)} of device time; the next, {_name(runner)}'s, "
            f"{times[runner].text(us)}" + (f"; then {listed(rest)}" if rest else "")
            + f" (profiler, median and p10–p90 of each capture's profiled forwards, "
              f"{shape_text(build.summary(leader)['shape'])})")
    lesson = f"{_name(leader)} takes the least device time, {said[leader]} against {said[runner]} for {_name(runner)}"
    return Statement(text, alike and first == [leader] and all(t.n > 1 for t in times.values()),
                     f"first {first}; alike: {alike}; profiled forwards {[t.n for t in times.values()]}", lesson=lesson)
