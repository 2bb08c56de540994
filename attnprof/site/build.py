"""What one site build reads, read once (records.reading, its check's files too): summaries, traces, runs,
and what cannot be used. A new Build is made for every build, so nothing read survives a rebuild."""
from __future__ import annotations

from pathlib import Path

from ..model import names, store
from ..analysis import records
from ..analysis import decide, derived, stats, trace


class RecordUnusable(Exception):
    """A record a piece reads is not usable (the message: why, and the fix): the one error a piece may render
    as a box. One not `known` to `check` (a record the site does not list) fails a strict build here."""

    def __init__(self, why: str, known: bool = True):
        super().__init__(why)
        self.known = known


EVIDENCE = "evidence-"  # a lesson's marker and its evidence: footnote labels evidence-1, evidence-2 ... on a page


class Build:
    def __init__(self, folder: Path = store.CAPTURES, problems: dict[str, str] | None = None, strict: bool = False):
        self.folder = Path(folder)
        self._problems = problems  # record -> why it cannot be used; found on first use when not given
        self.strict = strict  # a strict build: a piece may name only records the site lists
        self._summaries, self._traces, self._runs, self._drawn, self._counters = {}, {}, {}, {}, {}
        self._pooled: dict[str, list | dict] = {}
        self._made: dict = {}  # Build.once
        self._status: dict[str, str | None] = {}  # Build.problem, record by record
        self._listed: set[str] | None = None
        self._read: dict = {}  # every file this build has read (records.reading)
        self.evidence: list[str] | None = None  # the page being rendered: what its lessons rest on (`fold`)
        self.numbers: dict[tuple[str, str, str], set[str]] = {}  # (record, quantity, method) -> as pages state it

    def fold(self, lesson: str, evidence: str) -> str:
        """A conclusion's lesson with a marker opening its evidence, folded on the page (`EVIDENCE`); outside a
        page (`conclusions`, a report), the lesson with its evidence after it."""
        if self.evidence is None:
            return f"{lesson} (evidence: {evidence})"
        self.evidence.append(evidence)
        return f"{lesson}[^{EVIDENCE}{len(self.evidence)}]"

    def number(self, record: str, quantity: str, method: str, text: str) -> str:
        """`text`, noted under its record, quantity and method: a test holds pages to one number for each."""
        self.numbers.setdefault((record, quantity, method), set()).add(text)
        return text

    def _load(self, load, *args):
        """load(*args), reading each file once over the whole build."""
        with records.reading(self._read):
            return load(*args)

    @property
    def problems(self) -> dict[str, str]:
        if self._problems is None:
            self._problems = self._load(records.problems, self.folder)
        return self._problems

    def problem(self, record: str) -> str | None:
        """Why `record` cannot be used, or None: from `problems` where the whole set was checked, else checked
        alone (another set read beside this one reads a few of its records)."""
        if self._problems is not None:
            return self._problems.get(record)
        if record not in self._status:
            self._status[record] = self._load(records.status, record, self.folder)
        return self._status[record]

    def listed(self, record: str) -> bool:
        """Whether the site lists `record` (so `check` and the strict build hold it to its data)."""
        if self._listed is None:
            self._listed = records.used_records()
        return record in self._listed

    def unlisted(self, record: str) -> RecordUnusable:
        return RecordUnusable(f"{record!r} is not a record the site lists, so nothing checks it: name one that "
                              f"`python -m attnprof check` lists, or add it to the stage table", known=False)

    def summary(self, record: str) -> dict:
        if self.strict and not self.listed(record):
            raise self.unlisted(record)
        if why := self.problem(record):  # as for a run: what `check` lists is never read
            raise RecordUnusable(why)
        if record not in self._summaries:
            try:
                self._summaries[record] = self._load(records.load_summary, record, self.folder)
            except (store.CaptureMissing, ValueError) as e:
                raise RecordUnusable(str(e), known=self.problem(record) is not None) from None
        return self._summaries[record]

    def is_unavailable(self, record: str) -> bool:
        return "unavailable" in self.summary(record)

    def trace(self, record: str) -> dict:
        if record not in self._traces:
            self._traces[record] = self._load(records.load_trace, store.trace_path(records.folder_of(record, self.folder), record))
        return self._traces[record]

    def forwards(self, record: str) -> tuple[list[trace.Forward], trace.Forward]:
        """A capture's profiled forwards (or backwards), and the median one, which every page of it draws."""
        if record not in self._drawn:
            fwds = self.read_forwards(record)
            self._drawn[record] = fwds, trace.median_forward(fwds)
        return self._drawn[record]

    def read_forwards(self, record: str) -> list[trace.Forward]:
        self.summary(record)  # usable, or the box that says why not
        return self._load(records.forwards, record, self.folder)

    def once(self, key: str, make):
        """make(), once a build: what a piece derives from many records (the sets side by side, say)."""
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    def of_set(self, folder) -> "Build":
        """A build over another committed set of records (another GPU's), read once beside this one."""
        return self.once(f"set {folder}", lambda: Build(folder, strict=self.strict))

    def link(self, record: str) -> str:
        """Where a record's files lie in the built site (captures/<set>), the set it is read from."""
        return store.link(records.folder_of(record, self.folder))

    def device_properties(self, record: str) -> dict:
        return self.trace(record)["deviceProperties"][0]

    def counters(self, record: str) -> dict | None:
        """A capture's counters record, or None where none is usable; checked and read once per build."""
        if record not in self._counters:
            name = f"{record}.counters"
            usable = not self.problem(name) and not self._load(records.status, name, self.folder)
            self._counters[record] = self._load(records.load_counters, record, self.folder) if usable else None
        return self._counters[record]

    def counters_of(self, record: str) -> dict:
        """A capture's counters record for a piece that shows them: one not listed fails a strict build, one
        not usable renders a box."""
        if self.strict and not self.listed(f"{record}.counters"):
            raise self.unlisted(f"{record}.counters")
        measured = self.counters(record)
        if measured is None:
            why = self.problem(f"{record}.counters")
            raise RecordUnusable(why or records.status(f"{record}.counters", self.folder) or f"no counters of {record!r}",
                                 known=why is not None)
        return measured

    def run(self, name: str) -> list | dict:
        """A committed run's result (`run-<name>.json`), pooled over its repeats (stats.pooled); a name the site
        does not run is the code's mistake, whatever the records hold."""
        if name not in names.RUNS:
            raise ValueError(f"no measurement run named {name!r} (the site's runs: {', '.join(names.RUNS)})")
        if why := self.problem(f"run-{name}"):
            raise RecordUnusable(why)
        if name not in self._runs:
            try:
                self._runs[name] = self._load(records.load_run, name, self.folder)
            except (store.CaptureMissing, ValueError) as e:
                raise RecordUnusable(str(e)) from None
        if name not in self._pooled:  # a run taken in several processes reads as one over all of them
            record = self._runs[name]
            self._pooled[name] = (derived.derive(name, stats.pooled([record["result"], *record["repeats"]]))
                                  if record.get("repeats") else record["result"])
        return self._pooled[name]

    def repeats(self, name: str) -> list:
        """Each independent repeat's result of a run (one for a run taken once); `run(name)` pools them."""
        self.run(name)
        return [self._runs[name]["result"]] + list(self._runs[name].get("repeats", []))

    def run_record(self, name: str) -> dict:
        self.run(name)
        return self._runs[name]


def row(rows: list[dict], **match) -> dict:
    """The one row of a run's rows whose fields have these values."""
    return next(r for r in rows if all(r.get(k) == v for k, v in match.items()))


def across(build: Build, run: str, pick, method: str | None = None) -> decide.Range:
    """The range (decide.of) of a run's samples, `pick(result)` in each repeat, had by `method`; one a repeat
    lacks (out of memory, or could not run there) makes the run unusable, with its fix."""
    found, missing = [], 0
    for result in build.repeats(run):
        try:
            found.append(pick(result))
        except (KeyError, StopIteration):  # its row missing, or holding no samples
            missing += 1
    if missing and not found:  # in no process: the code asks for what the run never measures
        pick(build.repeats(run)[0])
    if missing:  # not a problem `check` lists of the record itself: `check` names the sentence, a strict build fails
        raise RecordUnusable(f"run run-{run}.json: a measurement is missing from {missing} of its {missing + len(found)} "
                             f"processes (it ran out of memory or could not run there): {records.RUN.fix(f'run-{run}')}",
                             known=False)
    return decide.of(found, method, run)


class FalseStatement(Exception):
    """A sentence on a page that the committed records contradict."""
