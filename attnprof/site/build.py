"""What one site build reads, read once: capture summaries, traces, run records, and the captures
that cannot be used. A new Build is made for every build, so nothing read survives a rebuild."""
from __future__ import annotations

from pathlib import Path

from .. import store, trace


class Build:
    def __init__(self, folder: Path = store.CAPTURES, problems: dict[str, str] | None = None):
        self.folder = Path(folder)
        self._problems = problems  # record -> why it cannot be used; found on first use when not given
        self._summaries, self._traces, self._runs = {}, {}, {}

    @property
    def problems(self) -> dict[str, str]:
        if self._problems is None:
            self._problems = store.stale_records(self.folder)
        return self._problems

    def summary(self, record: str) -> dict:
        if record not in self._summaries:
            self._summaries[record] = store.load_summary(record, self.folder)
        return self._summaries[record]

    def is_unavailable(self, record: str) -> bool:
        return "unavailable" in self.summary(record)

    def trace(self, record: str) -> dict:
        if record not in self._traces:
            self._traces[record] = trace.load(store.trace_path(self.folder, record))
        return self._traces[record]

    def device_properties(self, record: str) -> dict:
        return self.trace(record)["deviceProperties"][0]

    def run(self, name: str) -> list | dict:
        """The result of a committed measurement run (`run-<name>.json`)."""
        if name not in self._runs:
            self._runs[name] = store.load_run(name, self.folder)
        return self._runs[name]["result"]

    def run_record(self, name: str) -> dict:
        self.run(name)
        return self._runs[name]
