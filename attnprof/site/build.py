"""What one site build reads, read once: capture summaries, traces, run records, and the captures
that cannot be used. A new Build is made for every build, so nothing read survives a rebuild."""
from __future__ import annotations

from pathlib import Path

from ..model import store
from ..analysis import records
from ..analysis import trace


class RecordUnusable(Exception):
    """A record a piece reads is missing, stale or inconsistent (the message says why and the fix): the
    one error a piece may render as a box; the strict build fails on it through `problems`."""


class Build:
    def __init__(self, folder: Path = store.CAPTURES, problems: dict[str, str] | None = None):
        self.folder = Path(folder)
        self._problems = problems  # record -> why it cannot be used; found on first use when not given
        self._summaries, self._traces, self._runs, self._counters = {}, {}, {}, {}

    @property
    def problems(self) -> dict[str, str]:
        if self._problems is None:
            self._problems = records.problems(self.folder)
        return self._problems

    def summary(self, record: str) -> dict:
        if record not in self._summaries:
            try:
                self._summaries[record] = records.load_summary(record, self.folder)
            except (store.CaptureMissing, ValueError) as e:
                raise RecordUnusable(str(e)) from None
        return self._summaries[record]

    def is_unavailable(self, record: str) -> bool:
        return "unavailable" in self.summary(record)

    def trace(self, record: str) -> dict:
        if record not in self._traces:
            self._traces[record] = trace.load(store.trace_path(self.folder, record))
        return self._traces[record]

    def device_properties(self, record: str) -> dict:
        return self.trace(record)["deviceProperties"][0]

    def counters(self, record: str) -> dict | None:
        """The counters record of a capture, or None where there is none usable (missing, stale, inconsistent);
        checked and read once per build."""
        if record not in self._counters:
            name = f"{record}.counters"
            usable = name not in self.problems and not records.status(name, self.folder)
            self._counters[record] = records.load_counters(record, self.folder) if usable else None
        return self._counters[record]

    def run(self, name: str) -> list | dict:
        """The result of a committed measurement run (`run-<name>.json`)."""
        if f"run-{name}" in self.problems:
            raise RecordUnusable(self.problems[f"run-{name}"])
        if name not in self._runs:
            try:
                self._runs[name] = records.load_run(name, self.folder)
            except (store.CaptureMissing, ValueError) as e:
                raise RecordUnusable(str(e)) from None
        return self._runs[name]["result"]

    def run_record(self, name: str) -> dict:
        self.run(name)
        return self._runs[name]


class FalseStatement(Exception):
    """A sentence on a page that the committed records contradict."""
