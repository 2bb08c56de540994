"""One number per quantity: a stage's device time per forward, its one call, its CPU time, each said by one
method, is the same on every page that states it. Every piece of every chapter is rendered as its page renders it
(its lessons folding their evidence), and each figure a piece states through `Build.number` is noted under its
record, quantity and method (words.DEVICE ... words.MEDIAN ...); two different figures under one key fail."""
import re

from attnprof.model import store
from attnprof.site import registry
from attnprof.site.build import Build
from attnprof.site.words import CAPTURE_RUN, CPU, DEVICE, FALLBACK_RUN, GRAPHS_RUN, MEDIAN, ONE_CALL, TIMING_RUN

DOCS = store.ROOT / "docs"


def stated(build: Build) -> Build:
    """`build` after rendering every piece of every chapter, page by page."""
    registry.load()
    for page in sorted(DOCS.glob("*.md")):
        build.evidence = []
        for name, args in registry.directives(page.read_text(encoding="utf-8")):
            registry.expand(build, name, args)
        build.evidence = None
    return build


def conflicts(build: Build) -> dict:
    return {key: sorted(said) for key, said in build.numbers.items() if len(said) > 1}


def test_every_page_gives_one_number_per_quantity_and_method():
    build = stated(Build(store.CAPTURES, problems={}))
    assert not conflicts(build), "\n".join(f"{record}, {quantity} ({method}): {', '.join(said)}"
                                           for (record, quantity, method), said in conflicts(build).items())
    # the figures a learner meets first are among those held: flash's and cuDNN's device time at the post's shape
    # (the median forward's: its chapter's op list, tables, `value`, the claims' lessons)
    for key in (("flash", DEVICE, MEDIAN), ("cudnn", DEVICE, MEDIAN)):
        assert key in build.numbers, key
    # cuDNN's one call at the post's shape is stated from four runs, each under its own method (the capture's own,
    # the timing run, the CUDA-graph run, the fallback run), one number each
    for method in (CAPTURE_RUN, TIMING_RUN, GRAPHS_RUN, FALLBACK_RUN):
        assert len(build.numbers.get(("cudnn", ONE_CALL, method), ())) == 1, method
    assert ("flash", ONE_CALL, GRAPHS_RUN) in build.numbers and ("naive_compiled", ONE_CALL, GRAPHS_RUN) in build.numbers


def test_run_tables_name_their_run():
    """The graphs and fallback tables name their run: the fallback table in its one-call column's header, the
    graphs table (whose cards on a phone repeat each header) in the line under it."""
    from attnprof.site.pieces.runs import fallback, graphs
    build = Build(store.CAPTURES, problems={})
    header = lambda table: table.split("\n", 1)[0].replace("\u2011", "-")  # tables keep a hyphenated word whole
    assert GRAPHS_RUN in graphs(build).replace("\u2011", "-") and FALLBACK_RUN in header(fallback(build))


def test_two_numbers_for_one_quantity_are_caught():
    build = Build(store.CAPTURES, problems={})
    assert build.number("flash", DEVICE, MEDIAN, "94.7 µs") == "94.7 µs"
    build.number("flash", ONE_CALL, CAPTURE_RUN, "93.2 µs")  # another method: another key
    assert not conflicts(build)
    build.number("flash", DEVICE, MEDIAN, "94.2 µs")  # the timing run's median said as the capture's
    assert conflicts(build) == {("flash", DEVICE, MEDIAN): ["94.2 µs", "94.7 µs"]}


def test_the_op_list_diff_compares_the_two_median_forwards_and_says_so():
    """The diff of two op lists gives each one's forward drawn, its median forward, noted under that method, and the
    saving is the difference of those two, like with like."""
    from attnprof.text import us
    from attnprof.site.pieces.captures import diff
    registry.load()
    build = Build(store.CAPTURES, problems={})
    text = diff(build, "naive", "inplace")
    (naive,), (inplace,) = build.numbers[("naive", DEVICE, MEDIAN)], build.numbers[("inplace", DEVICE, MEDIAN)]
    a, b = build.summary("naive"), build.summary("inplace")
    assert naive == us(a["forward_device_us"]) and inplace == us(b["forward_device_us"])
    assert f"{a['title']}: {a['ops_per_forward']} ops, {naive}; {b['title']}: {b['ops_per_forward']} ops, {inplace} " in text
    assert f"device time of each forward drawn, the {MEDIAN}" in text
    assert f"device time saved: {us(a['forward_device_us'] - b['forward_device_us'])})" in text


def test_the_a100_table_says_which_op_counts_differ_from_the_posts_by_a_memset(monkeypatch):
    """The H200's op count of a rung less its Memsets equals the post's on some rungs: the table's note names
    exactly those, from the records and the post's figures; where the post gives no counts, no such words."""
    from attnprof.analysis import hardware
    from attnprof.model.stages import ladder
    from attnprof.site.pieces.captures import glance_a100
    from attnprof.site.words import short
    registry.load()
    build = Build(store.CAPTURES, problems={})
    s = {name: build.summary(name) for name in ladder()}
    memsets = {name: sum(op["kind"] == "memset" for op in s[name]["ops"]) for name in s}
    expect = {name for name in s if memsets[name] and hardware.FIGURES[name]["ops"] is not None
              and s[name]["ops_per_forward"] - memsets[name] == hardware.FIGURES[name]["ops"]}
    assert expect  # the committed records hold such rungs
    said = glance_a100(build).split("is the post's count for ")[1].split(";")[0]
    parts = set(re.split(r",? and |, ", said))
    assert {name for name in s if short(name) in parts} == expect, said
    monkeypatch.setattr(hardware, "FIGURES", {k: {**v, "ops": None} for k, v in hardware.FIGURES.items()})
    assert "the post's count for" not in glance_a100(Build(store.CAPTURES, problems={}))


def test_methods_sets_the_chapters_profiled_figures_beside_the_other_clocks():
    """Methods' one forward under every clock gives its profiled rows from the stage's capture, the numbers the
    cuDNN chapter gives (device and CPU time: the median of its forwards; span: the forward drawn's gaps), and a
    chapter's gaps box gives no figure of another run, only where launch-bound times a stream of them."""
    from attnprof.analysis import oplist
    from attnprof.site.pieces.captures import gaps
    from attnprof.site.pieces.timing import methods
    from attnprof.text import us
    registry.load()
    build = Build(store.CAPTURES, problems={})
    s = build.summary("cudnn")
    row = lambda name: next(line for line in methods(build).splitlines() if line.startswith(f"| {name}"))
    assert f"| {us(s['forward_device_us'])} |" in row("profiled device time")
    assert f"| {us(s['cpu_forward_us'])} |" in row("profiled CPU time")
    assert f"| {us(oplist.gaps(s).span_us)} |" in row("profiled span")
    line = gaps(build, "cudnn")
    assert "(launch-bound.md)" in line and "bound**" not in line and "one call" not in line
