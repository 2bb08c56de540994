"""Every checked sentence is a claim (attnprof/site/claims/core.py: CLAIMS): the records it reads and
its flips are data beside its words. Here every flip of every claim, for every `say` on the pages, is
applied to a copy of the records: the claim must then turn false, or, where its words follow the records,
choose other words that hold. A claim that reads a run decides over the run's repeats where it has them."""
import gzip
import json
import shutil

import pytest

from attnprof.analysis import records
from attnprof.model import store
from attnprof.site import registry
from attnprof.site.build import Build, FalseStatement
import re

from attnprof.site.claims.core import ADAPTS, CLAIMS, FALSE, LESSON_NUMBERS, LESSON_WORDS, check

registry.load()  # every module that registers claims, as a build loads them
DOCS = store.ROOT / "docs"


def usages() -> list[tuple[str, ...]]:
    """Every `say` of the chapters (name and arguments), once each."""
    return sorted({tuple(args) for page in DOCS.glob("*.md")
                   for piece, args in registry.directives(page.read_text(encoding="utf-8")) if piece == "say"})


def split(words):
    name, *args = words
    return name, [a for a in args if "=" not in a], dict(a.split("=", 1) for a in args if "=" in a)


def cases(then=None):
    """(words, index) of every flip of every claim said on a page; only those whose outcome is `then`, if given."""
    for words in usages():
        name, args, keywords = split(words)
        for i, flip in enumerate(CLAIMS[name].flips(*args, **keywords)):
            if then in (None, flip.then):
                yield pytest.param(words, i, id=f"{' '.join(words)} #{i} {flip.file}")


class Unchecked(Build):
    """A build over a copy whose one edited record is read as it is: no `check`, and a counters record
    read without holding it to its ncu report (a flip edits the JSON alone). It also notes every record
    it reads."""

    def __init__(self, folder):
        super().__init__(folder, problems={})
        self.read = set()

    def summary(self, record):
        self.read.add(record)
        return super().summary(record)

    def trace(self, record):
        self.read.add(record)
        return super().trace(record)

    def run(self, name):
        self.read.add(f"run-{name}")
        return super().run(name)

    def counters(self, record):
        self.read.add(f"{record}.counters")
        if f"{record}.counters" not in self._counters:
            self._counters[f"{record}.counters"] = records.load_counters(record, self.folder)
        return self._counters[f"{record}.counters"]


@pytest.fixture(scope="module")
def committed():
    return Unchecked(store.CAPTURES)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    folder = tmp_path_factory.mktemp("claims") / "captures"
    shutil.copytree(store.CAPTURES, folder)
    return folder


def flipped(clean, flip) -> tuple[Unchecked, object]:
    """A build over the copy with `flip` applied: to the record as the build reads it (a capture's or a counters
    record's figures, derived from its trace or report), or to its file (a trace, a run's samples); the caller
    puts it back."""
    if flip.file.endswith(".json") and records.kind_of(flip.record) is not records.RUN:
        change = records.changed(clean, flip.record, flip.change)
        change.__enter__()
        return Unchecked(clean), lambda: change.__exit__(None, None, None)
    path = clean / flip.file
    raw = path.read_bytes()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data = json.load(f)
    flip.change(data)
    with opener(path, "wt") as f:
        json.dump(data, f)
    return Unchecked(clean), lambda: path.write_bytes(raw)


def test_every_claim_is_said_on_a_page_and_has_a_flip():
    assert {words[0] for words in usages()} == set(CLAIMS)
    for words in usages():
        name, args, keywords = split(words)
        flips = CLAIMS[name].flips(*args, **keywords)
        assert flips and all(f.then in (FALSE, ADAPTS) for f in flips), words


@pytest.mark.parametrize("words", usages(), ids=" ".join)
def test_a_claim_holds_and_reads_what_it_declares(committed, words):
    """On the committed records every claim holds, and it reads only the records it says it reads (so a
    flip of any other record cannot move it), among them the one each of its flips changes."""
    name, args, keywords = split(words)
    committed.read.clear()
    s = check(committed, name, *args, **keywords)
    assert s.holds and s.text and "{" not in s.text
    declared = set(CLAIMS[name].reads(*args, **keywords))
    assert committed.read <= declared, committed.read - declared
    assert {f.record for f in CLAIMS[name].flips(*args, **keywords)} <= declared


NUMBER = re.compile(r"(?<![\w.,-])\d+(?:[.,]\d+)*")  # 8,192, 2.3×, S=8,192; not H200, FlashAttention-4


def numbers(lesson: str) -> list[str]:
    """The numbers a lesson states: outside code (a kernel's name), not part of a name (H200, sm_90)."""
    return NUMBER.findall(re.sub(r"`[^`]*`", "", lesson))


def assert_a_lesson(lesson: str):
    assert lesson and "{" not in lesson and "(evidence" not in lesson
    assert not lesson.endswith("."), lesson  # the page ends the sentence after the marker, so the marker sits inside it
    assert len(lesson.split()) <= LESSON_WORDS, (len(lesson.split()), lesson)
    assert len(numbers(lesson)) <= LESSON_NUMBERS, (numbers(lesson), lesson)


def test_numbers_in_a_lesson_are_counted_as_a_reader_counts_them():
    assert numbers("FlashAttention-4 on the H200 runs at 686 TFLOP/s from S=8,192, 2.3× `sm_90a` rank 0") == \
        ["686", "8,192", "2.3", "0"]


@pytest.mark.parametrize("words", usages(), ids=" ".join)
def test_every_claim_says_a_short_lesson_and_folds_its_evidence(committed, words):
    """A claim's lesson is what the prose shows: one short sentence, at most two numbers; its ranges, method and
    processes are its evidence, which a page folds and a report keeps after the lesson."""
    name, args, keywords = split(words)
    s = check(committed, name, *args, **keywords)
    assert_a_lesson(s.lesson)
    assert s.text != s.lesson and len(s.text) > len(s.lesson)
    on_a_page, elsewhere = Build(store.CAPTURES, problems={}), Build(store.CAPTURES, problems={})
    on_a_page.evidence = []
    said = registry.expand(on_a_page, "say", list(words))
    assert said == f"{s.lesson}[^evidence-1]" and on_a_page.evidence == [s.text]
    assert registry.expand(elsewhere, "say", list(words)) == f"{s.lesson} (evidence: {s.text})"


@pytest.mark.parametrize("words, index", list(cases()))
def test_a_flip_turns_its_claim(committed, clean, words, index):
    name, args, keywords = split(words)
    flip = CLAIMS[name].flips(*args, **keywords)[index]
    before = check(committed, name, *args, **keywords)
    build, restore = flipped(clean, flip)
    try:
        if flip.then == FALSE:
            with pytest.raises(FalseStatement, match=f"'{name}'"):
                check(build, name, *args, **keywords)
        else:  # other words, for another outcome, that hold
            after = check(build, name, *args, **keywords)
            if flip.to is None:
                assert after.outcome != before.outcome and after.text != before.text
            else:  # it leads to its outcome, from either: words for each outcome hold, whichever the records give
                assert after.outcome == flip.to and (before.outcome == flip.to or after.text != before.text)
            assert "{" not in after.text
            assert_a_lesson(after.lesson)
    finally:
        restore()


def _with_repeats(record, rows_of, change):
    """A run record with two more repeats: copies of its result whose rows `change` edits."""
    extra = []
    for factor in (1.0, 1.0):
        result = json.loads(json.dumps(record["result"]))
        for r in rows_of(result):
            change(r, factor)
        extra.append(result)
    record["repeats"] = extra


def test_a_run_claim_decides_across_repeats_where_there_are_some(clean):
    """cpu-rank: cuDNN's enqueue decidedly above flash's in one process (three times it); with two more repeats in which
    cuDNN's is the same as flash's, the medians across the three repeats overlap, and the words say so."""
    from attnprof.site.claims.core import Flip

    def enqueue(result, stage):
        return next(r for r in result["rows"] if r["stage"] == stage and r["shape"] == [8, 16, 1024, 64])

    def once(record):  # one process, in which cuDNN takes three times flash's time to enqueue: beyond the
        record.pop("repeats", None)  # CPU enqueue's margin between processes
        enqueue(record["result"], "cudnn")["enqueue_us"] = [3 * x for x in enqueue(record["result"], "flash")["enqueue_us"]]

    def same_as_flash(row, _):
        if row["stage"] == "cudnn" and row["shape"] == [8, 16, 1024, 64]:
            row["enqueue_us"] = [x / 3 for x in row["enqueue_us"]]  # flash's own in these repeats

    build, restore = flipped(clean, Flip("run-timing.json", once))
    try:
        one = check(build, "cpu-rank", "cudnn", "flash", "efficient")
    finally:
        restore()
    assert "above flash's" in one.text and "p10–p90 of one process" in one.text
    flip = Flip("run-timing.json", lambda r: (once(r), _with_repeats(r, lambda res: res["rows"], same_as_flash)))
    build, restore = flipped(clean, flip)
    try:
        text = check(build, "cpu-rank", "cudnn", "flash", "efficient").text
        assert "over 3 separate processes" in text and "not told apart from flash's" in text
    finally:
        restore()


def test_the_leads_sentence_bounds_each_head_dim_as_its_table_of_points_does(committed):
    """leads-long says, at each head dim, up to which length cuDNN leads, from which FlashAttention-4 does,
    and how many lengths between are not told apart; its table of points (one per swept length and head dim)
    bears out each: cuDNN in front alone up to the first, FlashAttention-4 alone from the second, the two
    not told apart at every length between."""
    import re
    text = check(committed, "leads-long", "fa4").text
    said = re.findall(r"at head dim (\d+), cuDNN leads up to S=([\d,]+) and FlashAttention-4 from S=([\d,]+) up, "
                      r"with (\d+) of the (\d+) lengths between them, not told apart", text, re.I)
    assert sorted(int(d) for d, *_ in said) == [64, 128], text
    for d, upto, since, tied, of in said:
        upto, since = int(upto.replace(",", "")), int(since.replace(",", ""))
        rows = [[c.strip() for c in line.split("|")[1:-1]]
                for line in registry.expand(committed, "leads-long-points", ["fa4", d]).splitlines()[2:] if line.startswith("|")]
        assert len(rows) == int(of) == len({r["shape"][2] for r in committed.run("sweep")}), d
        for s, _, _, in_front in rows:
            n = int(s.replace(",", ""))
            assert in_front == ("cuDNN" if n <= upto else "FlashAttention-4" if n >= since else
                                "FlashAttention-4 and cuDNN (not told apart)" if in_front.startswith("Flash") else
                                "cuDNN and FlashAttention-4 (not told apart)"), (d, n, in_front)
        assert sum(upto < int(r[0].replace(",", "")) < since for r in rows) == int(tied), d
    with pytest.raises(ValueError, match="no point at head dim 96"):
        registry.expand(committed, "leads-long-points", ["fa4", "96"])


def test_a_measurement_missing_from_one_process_makes_the_run_unusable(clean):
    """A row that ran out of memory in the last of a run's processes, but ran in the others: its range across
    the processes names the run and its fix (the strict build fails on it, `serve` shows a box)."""
    from attnprof.site.build import RecordUnusable, across, row
    from attnprof.site.claims.core import Flip

    def out_of_memory_in_the_last(record):
        last = record["repeats"][-1][0]
        for key in set(last) - {"path", "shape", "layout"}:
            del last[key]
        last["oom"] = True

    build, restore = flipped(clean, Flip("run-fastest.json", out_of_memory_in_the_last))
    try:
        first, processes = build.run("fastest")[0], len(build.repeats("fastest"))
        pick = lambda result: row(result, path=first["path"], shape=first["shape"], layout=first["layout"])["back_to_back_us_each"]
        with pytest.raises(RecordUnusable, match=rf"run-fastest\.json: a measurement is missing from 1 of its {processes} "
                                                 r"processes.*sweep --only fastest") as unusable:
            across(build, "fastest", pick)
        assert not unusable.value.known  # not a record problem `check` lists: it names the sentence, strict fails
        with pytest.raises(KeyError):  # a field no process has is the code's mistake, not the run's
            across(build, "fastest", lambda result: row(result, path=first["path"], shape=first["shape"],
                                                        layout=first["layout"])["back_to_back_ms_each"])
        second = build.run("fastest")[1]  # a row every process measured still has its range
        assert across(build, "fastest", lambda result: row(result, path=second["path"], shape=second["shape"],
                                                           layout=second["layout"])["back_to_back_us_each"]).n == processes
    finally:
        restore()


# ---- the timing run's verdicts that a page expects (`verdict ... expect=`, `verdicts ... expect=`) ------------

def expected_verdicts() -> list[tuple[str, ...]]:
    """Every timing verdict on the pages that states the verdict it expects, once each."""
    return sorted({(piece, *args) for page in DOCS.glob("*.md")
                   for piece, args in registry.directives(page.read_text(encoding="utf-8"))
                   if piece in ("verdict", "verdicts") and any(a.startswith("expect=") for a in args)})


def _the_other_verdict(row: dict, expect: str):
    """A timing row's samples changed, in place, so that the verdict a page expects of it is no longer so."""
    b2b = row["back_to_back_us"]
    if expect == "GPU-bound":  # the stream now at the CPU's pace, far from the GPU's
        row["enqueue_us"], row["graph_us"] = list(b2b), [0.3 * x for x in b2b]
    elif expect == "launch-bound":  # the stream now at the GPU's pace, far from the CPU's
        row["graph_us"], row["enqueue_us"] = list(b2b), [0.3 * x for x in b2b]
    elif expect == "kernels_dominate":  # one call now mostly launch
        row["one_call_us"] = [3 * x for x in row["graph_us"]]
    elif expect == "launch_dominates":  # one call now mostly kernels
        row["one_call_us"] = [1.2 * x for x in row["graph_us"]]
    else:
        raise AssertionError(f"no flip for expect={expect}")


@pytest.mark.parametrize("directive", expected_verdicts(), ids=" ".join)
def test_an_expected_verdict_fails_when_every_process_says_otherwise(clean, directive):
    from attnprof.site.registry import expand
    piece, *args = directive
    expect = next(a for a in args if a.startswith("expect=")).removeprefix("expect=")
    shape = args[1] if piece == "verdict" else args[0]
    expand(Build(clean, problems={}), piece, args)  # it holds on the committed records
    path = clean / "run-timing.json"
    kept = path.read_text()
    record = json.loads(kept)
    for result in [record["result"], *record.get("repeats", [])]:
        for row in result["rows"]:
            if "x".join(map(str, row["shape"])) == shape and (piece == "verdicts" or row["stage"] == args[0]):
                _the_other_verdict(row, expect)
    path.write_text(json.dumps(record))
    try:
        with pytest.raises(FalseStatement):
            expand(Build(clean, problems={}), piece, args)
    finally:
        path.write_text(kept)


def _pages_saying(words) -> list[str]:
    return sorted(p.name for p in DOCS.glob("*.md")
                  if any(piece == "say" and tuple(args) == tuple(words)
                         for piece, args in registry.directives(p.read_text(encoding="utf-8"))))


@pytest.mark.parametrize("words, index", list(cases(ADAPTS)))
def test_a_page_holds_under_each_outcome_of_its_claims(clean, words, index):
    """A claim whose words follow the records, given its other outcome: every page that says it still renders,
    every other checked sentence and expected verdict on it holding too, so no typed claim around it rests on
    the outcome the committed records happen to give."""
    import markdown
    from attnprof.site import extension
    name, args, keywords = split(words)
    build, restore = flipped(clean, CLAIMS[name].flips(*args, **keywords)[index])
    try:
        for page in _pages_saying(words):
            markdown.markdown((DOCS / page).read_text(encoding="utf-8"),
                              extensions=["admonition", "attr_list", "md_in_html",
                                          extension.PiecesExtension(build=Build(clean, problems={}))])
    finally:
        restore()


# ---- truth conditions of the conclusion pieces whose words follow the records (claims/conditions.py) ----------

from attnprof.site.claims.core import CONDITIONS, conditioned, hold  # noqa: E402

FOLLOW_THE_RECORDS = ("decode-error", "steady", "verdict")  # conclusions whose words adapt


def conditioned_usages() -> list[tuple[str, ...]]:
    """Every conclusion piece on the pages held to a truth condition (no `expect=`), once each."""
    return sorted({(piece, *args) for page in DOCS.glob("*.md")
                   for piece, args in registry.directives(page.read_text(encoding="utf-8"))
                   if piece != "say" and conditioned(piece, args)})


def condition_cases():
    for words in conditioned_usages():
        name, args, keywords = split(words)
        for i, flip in enumerate(CONDITIONS[name].flips(*args, **keywords)):
            yield pytest.param(words, i, id=f"{' '.join(words)} #{i} {flip.file}")


def test_every_conclusion_that_follows_the_records_has_a_truth_condition_and_flips():
    found = {(piece, *args) for page in DOCS.glob("*.md")
             for piece, args in registry.directives(page.read_text(encoding="utf-8"))
             if piece in FOLLOW_THE_RECORDS and not any(a.startswith("expect=") for a in args)}
    assert found and found <= set(conditioned_usages())
    for words in conditioned_usages():
        name, args, keywords = split(words)
        flips = CONDITIONS[name].flips(*args, **keywords)
        assert {f.then for f in flips} == {FALSE, ADAPTS}, words  # one it must turn false on, one it must follow


@pytest.mark.parametrize("words", conditioned_usages(), ids=" ".join)
def test_a_condition_holds_and_reads_what_it_declares(committed, words):
    name, args, keywords = split(words)
    committed.read.clear()
    s = hold(committed, name, *args, **keywords)
    assert s.holds and s.text == registry.expand(Build(store.CAPTURES, problems={}), name, list(words[1:]))
    declared = set(CONDITIONS[name].reads(*args, **keywords))
    assert committed.read <= declared, committed.read - declared
    assert {f.record for f in CONDITIONS[name].flips(*args, **keywords)} <= declared


@pytest.mark.parametrize("words, index", list(condition_cases()))
def test_a_flip_turns_its_condition(committed, clean, words, index):
    """FALSE: `check` then names the conclusion; ADAPTS: the piece states another outcome (or the one the flip
    names), and still holds."""
    name, args, keywords = split(words)
    flip = CONDITIONS[name].flips(*args, **keywords)[index]
    before = hold(committed, name, *args, **keywords)
    build, restore = flipped(clean, flip)
    try:
        if flip.then == FALSE:
            with pytest.raises(FalseStatement, match=f"'{name}'"):
                hold(build, name, *args, **keywords)
        else:
            after = hold(build, name, *args, **keywords)
            if flip.to is None:
                assert after.outcome != before.outcome and after.text != before.text
            else:  # it leads to its outcome, from either
                assert after.outcome == flip.to and (before.outcome == flip.to or after.text != before.text)
    finally:
        restore()


def test_check_names_a_conclusion_whose_condition_fails(clean):
    """`check` (false_statements) holds the pages' conclusion pieces to their conditions: concatenating the
    decode cache at no cost makes the end-to-end page's decode-error sentence false, named with its page."""
    from attnprof.site.claims.core import false_statements
    build, restore = flipped(clean, CONDITIONS["decode-error"].flips()[0])
    try:
        found = false_statements(Build(clean, problems={}, strict=True), DOCS)
    finally:
        restore()
    assert len(found) == 1 and found[0].startswith("docs/end-to-end.md: <!-- attnprof: decode-error "), found
