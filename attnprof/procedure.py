"""How records are taken: the settings every record's key includes, and the error for a record that
cannot be taken here. Pure constants, imported by the record kinds and by the capture code."""

DEFAULT_DTYPE = "bf16"
FORMAT = 1  # bump when the capture procedure changes: every record becomes stale

LABEL = "attention_forward"  # the record_function name around every profiled forward
BWD_LABEL = "attention_backward"  # ... and around every profiled backward
WARMUP_CALLS = 10
EVENT_REPS = 50
SCHEDULE = dict(wait=1, warmup=1, active=3, repeat=1)
BWD_FLOP_FACTOR = 2.5  # backward FLOPs counted as 2.5x the forward's (five matmuls against two)


class CaptureError(RuntimeError):
    """A record that cannot be taken here (no GPU, say); the message says why and what to do."""
