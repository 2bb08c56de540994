"""Gaps between a forward's device ops, read off real H200 traces: when the GPU waits for the CPU."""
import pytest

from attnprof.analysis import trace
from attnprof.model.stages import STAGES
from attnprof.model.procedure import LABEL


def median_gaps(h200, stage):
    return trace.gaps(trace.median_forward(trace.forwards(h200(stage), LABEL)).ops)


def test_naive_at_the_posts_shape_keeps_its_gpu_busy_in_the_profiled_span(h200):
    g = median_gaps(h200, "naive")
    assert g.idle_us < g.busy_us and g.idle_share < 0.1
    assert g.busy_us <= g.span_us
    # its launches run ahead of the GPU: later ops wait in the queue far longer than the first
    assert g.launch_latency_us[-1] > 5 * g.launch_latency_us[0]


def test_flash_at_a_short_shape_idles_most_of_its_profiled_span(h200):
    g = median_gaps(h200, "flash-short")
    assert g.idle_us > g.busy_us and g.idle_share > 0.5
    assert len(g.launch_latency_us) == 1 and g.launch_latency_us[0] > 0


def test_busy_is_the_union_of_overlapping_ops():
    def op(start, dur, launch):
        return trace.DeviceOp("k", "kernel", dur, start, "cudaLaunchKernel", launch)
    g = trace.gaps([op(10, 5, 0), op(12, 5, 1), op(30, 10, 2)])  # 10–17 overlap, then 30–40
    assert g.busy_us == pytest.approx(17.0) and g.span_us == pytest.approx(40.0)
    assert g.idle_us == pytest.approx(23.0) and g.idle_share == pytest.approx(23 / 40)
    assert g.launch_latency_us == [10, 11, 28]
    assert trace.gaps([]).span_us == 0.0


def test_a_graph_replay_is_counted_through_its_one_launch(h200):
    fwds = trace.forwards(h200("flash-graph"), LABEL)
    assert [len(f.ops) for f in fwds] == [1, 1, 1]
    (op,) = fwds[0].ops
    assert op.launch == "cudaGraphLaunch" and "flash_fwd_kernel" in op.name
    assert fwds[0].cpu_ops == []  # no operator runs on the CPU during a replay


def test_a_wrapped_stage_is_keyed_by_both_snippets():
    assert STAGES["flash_graph"].snippets == ["sdpa", "graphed"]
    assert STAGES["naive_compiled"].snippets == ["naive", "compiled"]
    assert STAGES["flash_graph"].source_hash() != STAGES["flash"].source_hash()
    assert STAGES["flash"].snippets == ["sdpa"]
