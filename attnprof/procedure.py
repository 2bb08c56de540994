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


# What a capture measures once and keeps no data to recompute from (the output itself, the allocator's
# peak, the first call's clock); everything else in a record follows from its trace or raw samples.
MEASURED_ONCE = {"rel_err": "relative error against float64", "grad_rel_err": "the gradients' relative errors",
                 "peak_extra_bytes": "peak memory", "memory": "memory held and peaks",
                 "first_call_ms": "the first call's time"}


class CaptureError(RuntimeError):
    """A record that cannot be taken here (no GPU, say); the message says why and what to do."""
