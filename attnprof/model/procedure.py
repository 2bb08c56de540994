"""How records are taken: the settings every record's key includes, and the error for a record that
cannot be taken here. Pure constants, imported by the record kinds and by the capture code."""

DEFAULT_DTYPE = "bf16"
PROCEDURE = 1  # the way of measuring: bump it by hand when that changes, and every record becomes stale

LABEL = "attention_forward"  # the record_function name around every profiled forward
BWD_LABEL = "attention_backward"  # ... and around every profiled backward
WARMUP_CALLS = 10
EVENT_REPS = 50
SCHEDULE = dict(wait=1, warmup=1, active=3, repeat=1)
# Independent repeats (processes) of a run whose numbers a conclusion compares. Three decide the CPU side's 10-15 %
# effects compared round by round (decide.steps): in place against naive by CPU enqueue (12-20 % a process) and
# cuDNN against flash (9-19 %) are decided in each of the 11 committed regenerations of the timing run in rounds.
RUN_REPEATS = 3
# ... of a run two processes decide as three do (`python tools/fewer.py`, regenerations 19d58c5 to d2acc5e): any
# two of three of the sweep, fastest, fallback, decode, e2e, graphs and backward runs change none of 72 conclusions,
# A/A rates at 97 % or more; timing's and decode_step's do change (cpu-rank, decode-error). New runs: RUN_REPEATS.
FEW_REPEATS = 2
STEADY_REPEATS = 5  # the steady run's processes (measure/steady.py): the fastest forward's spread across them
# A round of interleaved measurements (measure/bench.py interleaved) with an SM clock reading, before or after it, below
# this share of the GPU's maximum SM clock is dropped for every arm where rounds are compared (never all of them, and
# never a ceiling's, which compares no rounds): NVBench's default throttle threshold, "--throttle-threshold: ...
# percentage of the device's default clock rate. Default is 75" (https://github.com/NVIDIA/nvbench/blob/main/docs/cli_help.md).
THROTTLE = 0.75
# After a round dropped at a throttled clock, the next waits this long for the clock to recover: NVBench's default,
# "--throttle-recovery-delay <value>: Set the GPU throttle recovery delay in seconds. Default is 0.05 seconds." (the same page)
THROTTLE_RECOVERY_S = 0.05
# NVML's clocks-event reason bit (in clocks.throttle_reasons) for the power cap: nvmlClocksEventReasonSwPowerCap
SW_POWER_CAP = 0x4
BWD_FLOP_FACTOR = 2.5  # backward FLOPs counted as 2.5x the forward's (five matmuls against two)


# what we ask ncu for: our name → ncu metric
METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "warps_active_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",  # achieved occupancy
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "tensor_pipe_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",  # mma and wgmma
    "wgmma_instructions": "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "fma_pipe_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",  # FP32 FFMA on CUDA cores
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_bytes": "dram__bytes.sum",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "limit_registers": "launch__occupancy_limit_registers",
    "limit_shared_memory": "launch__occupancy_limit_shared_mem",
    "limit_warps": "launch__occupancy_limit_warps",
    "limit_blocks": "launch__occupancy_limit_blocks",
}


# What a capture measures once, with no data to recompute it from; the rest follows from its trace or samples.
MEASURED_ONCE = {"rel_err": "relative error against float64", "grad_rel_err": "the gradients' relative errors",
                 "peak_extra_bytes": "peak memory", "memory": "memory held and peaks",
                 "first_call_ms": "the first call's time", "saved": "what autograd saved for the backward",
                 "rel_err_rows": "each rank's relative error", "rel_err_vs_single_gpu": "each rank's error against one GPU",
                 "max_abs": "verification's largest error", "rel_frobenius": "verification's relative error",
                 "worst_row": "verification's worst row",
                 "device_ops": "a fallback case's profiled ops", "device_us": "a fallback case's profiled device time",
                 "cpu_us": "a fallback case's profiled CPU time"}
# ... and a two-GPU record: its CUDA-event medians, kept without samples; check bounds them instead.
MEASURED_ONCE_TWO_GPU = {"event_median_us": "each rank's and the single GPU's CUDA-event median (kept without "
                                            "samples: bounded by each rank's profiled forward and the sweep's flash rate)"}
# The raw samples every median, percentile and rate is recomputed from. `back_to_back_us` is samples in a timing
# row; elsewhere it is the median of `back_to_back_us_each`, a number, never pooled.
RAW_SAMPLES = ("event_times_us", "times_us", "timing", "one_call_us", "one_call_wall_us", "back_to_back_us_each",
               "back_to_back_us", "enqueue_us", "enqueue_late_us", "graph_us", "profiled")


class CaptureError(RuntimeError):
    """A record that cannot be taken here (no GPU, say); the message says why and what to do."""
