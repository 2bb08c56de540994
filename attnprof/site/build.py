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
        self._summaries, self._traces, self._runs, self._shown = {}, {}, {}, {}

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

    def forwards(self, record: str) -> tuple[list[trace.Forward], trace.Forward]:
        """The profiled forwards (or backwards) of a capture, and the one its page shows: the trace figure,
        the op list, the CPU side and the gaps all draw this one (trace.typical_forward)."""
        if record not in self._shown:
            s = self.summary(record)
            fwds = trace.forwards(self.trace(record), s["label"], s.get("follow_autograd", False))
            self._shown[record] = fwds, trace.typical_forward(fwds)
        return self._shown[record]

    def shown(self, record: str) -> dict:
        """The summary of a capture with the per-forward fields (ops, CPU ops, op count, device time) of the
        forward its page shows, so a piece made for a summary lists that forward. The summary itself keeps
        the forward whose device time is the median: what `check` holds, and what the figures per forward
        across stages (`value`, the tables of several stages) read."""
        s = self.summary(record)
        _, f = self.forwards(record)
        what = s.get("pass", "forward")
        return dict(s, ops=[dict(o.__dict__) for o in f.ops], cpu_ops=[dict(c.__dict__) for c in f.cpu_ops],
                    **{f"ops_per_{what}": len(f.ops), f"{what}_device_us": f.device_us})

    def device_properties(self, record: str) -> dict:
        return self.trace(record)["deviceProperties"][0]

    def counters(self, record: str) -> dict | None:
        """The counters record of a capture, or None where there is none usable (missing, stale, inconsistent)."""
        if f"{record}.counters" in self.problems or records.status(f"{record}.counters", self.folder):
            return None
        return records.load_counters(record, self.folder)

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
