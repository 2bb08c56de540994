"""Trace analysis on real H200 traces: per-forward device work, counted by correlation."""
import copy
import gzip

import pytest

from attnprof import names, oplist, trace
from tests.conftest import FIXTURES, LABEL


def kinds(fwd):
    return [op.kind for op in fwd.ops]


def test_three_annotated_forwards_with_equal_counts(h200):
    for stage in ("naive", "inplace", "math", "flash", "cudnn"):
        fwds = trace.forwards(h200(stage), LABEL)
        assert len(fwds) == 3, stage  # schedule(wait=1, warmup=1, active=3)
        assert len({len(f.ops) for f in fwds}) == 1, stage


def test_naive_forward_in_launch_order(h200):
    fwd = trace.forwards(h200("naive"), LABEL)[0]
    assert kinds(fwd) == ["memset", "kernel", "kernel", "memcpy", "kernel", "kernel", "kernel"]
    labels = [names.label(op.name) for op in fwd.ops]
    assert labels[1].startswith("nvjet_sm90") and labels[6].startswith("nvjet_sm90")
    assert "[Mul]" in labels[2] and "[masked_fill]" in labels[4] and labels[5] == "softmax_warp_forward"
    starts = [op.launch_start_us for op in fwd.ops]
    assert starts == sorted(starts)
    assert all(op.duration_us > 0 for op in fwd.ops)


def test_memcpy_on_naive_absent_in_place(h200):
    naive = trace.forwards(h200("naive"), LABEL)[0]
    inplace = trace.forwards(h200("inplace"), LABEL)[0]
    assert "memcpy" in kinds(naive) and "memcpy" not in kinds(inplace)
    memcpy = next(op for op in naive.ops if op.kind == "memcpy")
    assert memcpy.name.startswith("Memcpy DtoD") and memcpy.launch == "cudaMemcpyAsync"
    summaries = [{"stage": s, "ops": [op.__dict__ for op in f.ops], "ops_per_forward": len(f.ops),
                  "forward_device_us": f.device_us} for s, f in (("naive", naive), ("inplace", inplace))]
    removed, added = oplist.ops_diff(*summaries)
    assert [op["kind"] for _, op in removed] == ["memcpy"] and added == []


def test_device_ops_carry_footprint(h200):
    op = trace.forwards(h200("flash"), LABEL)[0].ops[0]
    assert op.kind == "kernel" and "flash_fwd_kernel" in op.name
    assert op.registers == 255 and op.block == [128, 1, 1] and op.shared_memory > 0 and len(op.grid) == 3


def test_cudnn_launches_through_the_driver_api(h200):
    fwd = trace.forwards(h200("cudnn"), LABEL)[0]
    kernel = next(op for op in fwd.ops if op.kind == "kernel")
    assert kernel.launch == "cuLaunchKernelEx" and "sm90" in kernel.name
    assert not any(c.name == "aten::transpose" for c in fwd.cpu_ops)


def test_math_rebuilds_the_mask_on_every_forward(h200):
    for fwd in trace.forwards(h200("math"), LABEL):
        ops = {c.name for c in fwd.cpu_ops}
        assert {"aten::ones", "aten::tril", "aten::where", "aten::_safe_softmax"} <= ops
        assert len(fwd.ops) == 20


def test_counting_ignores_work_outside_the_forward(h200):
    """Device work launched outside the annotation, or from another thread, is not counted."""
    t = copy.deepcopy(h200("inplace"))
    ann = next(e for e in t["traceEvents"] if e.get("cat") == "user_annotation" and e["name"] == LABEL)
    kernel = next(e for e in t["traceEvents"] if e.get("cat") == "kernel")
    outside = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": ann["pid"], "tid": ann["tid"],
               "ts": ann["ts"] - 50, "dur": 5, "args": {"correlation": 10**9}}
    other_thread = dict(outside, tid="other", ts=ann["ts"] + 1, args={"correlation": 10**9 + 1})
    stray = [dict(kernel, ts=kernel["ts"] + 1, args=dict(kernel["args"], correlation=c)) for c in (10**9, 10**9 + 1)]
    t["traceEvents"] += [outside, other_thread, *stray]
    before = [len(f.ops) for f in trace.forwards(h200("inplace"), LABEL)]
    assert [len(f.ops) for f in trace.forwards(t, LABEL)] == before


def test_median_forward_is_one_of_the_forwards(h200):
    fwds = trace.forwards(h200("naive"), LABEL)
    assert trace.median_forward(fwds) in fwds


def test_bad_traces_raise_one_clear_error(tmp_path, h200):
    with pytest.raises(trace.TraceError, match="missing"):
        trace.load(tmp_path / "nope.trace.json.gz")
    truncated = tmp_path / "cut.trace.json.gz"
    truncated.write_bytes((FIXTURES / "h200-naive.trace.json.gz").read_bytes()[:500])
    with pytest.raises(trace.TraceError, match="unreadable"):
        trace.load(truncated)
    notrace = tmp_path / "x.trace.json.gz"
    notrace.write_bytes(gzip.compress(b'{"hello": 1}'))
    with pytest.raises(trace.TraceError, match="traceEvents"):
        trace.load(notrace)
    with pytest.raises(trace.TraceError, match="no forward annotated"):
        trace.forwards(h200("naive"), "some_other_label")
