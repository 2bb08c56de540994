"""Kept for attnprof/measure/context_parallel.py alone, which imports these names from here.

The two-GPU records are keyed by that file's tokens, its import lines included, and only a machine with
two GPUs retakes them: when one does, point its imports at attnprof/model/store.py and delete this file.
"""
from __future__ import annotations

from .model.procedure import EVENT_REPS, LABEL, SCHEDULE, WARMUP_CALLS, CaptureError  # noqa: F401
from .model.store import write_summary, write_trace  # noqa: F401
