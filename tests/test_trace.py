"""Trace analysis on real H200 traces: per-forward device work, counted by correlation."""
import copy
import gzip

import pytest

from attnprof.analysis import kernel_names, oplist, trace
from attnprof.model.procedure import LABEL


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
    labels = [kernel_names.label(op.name) for op in fwd.ops]
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
    before, after = trace.forwards(h200("inplace"), LABEL), trace.forwards(t, LABEL)
    assert [op_list(f) for f in after] == [op_list(f) for f in before]  # the same ops, not only as many
    assert [f.device_us for f in after] == [f.device_us for f in before]


def op_list(fwd):
    return [(op.name, op.kind, op.duration_us, op.start_us, op.launch) for op in fwd.ops]


def test_each_forward_has_its_own_device_work(h200):
    """Counted by correlation, the three forwards of one trace differ a little, as real runs do; a
    counter that divided all device work evenly among them would make them equal."""
    fwds = trace.forwards(h200("naive"), LABEL)
    assert [f.device_us for f in fwds] == pytest.approx([1075.165, 1075.004, 1076.573], abs=1e-6)
    assert [f.ops[1].duration_us for f in fwds] != [fwds[0].ops[1].duration_us] * 3
    for f in fwds:
        assert all(0 <= op.launch_start_us <= op.start_us for op in f.ops)  # launched inside, run after


@pytest.mark.parametrize("stage, index", [("naive", 0), ("math", 2), ("flash", 0), ("cudnn", 1)])
def test_median_forward_is_the_middle_one(h200, stage, index):
    fwds = trace.forwards(h200(stage), LABEL)
    assert trace.median_forward(fwds) is fwds[index]


def test_median_forward_of_five():
    fwds = [trace.Forward(cpu_us=i, ops=[trace.DeviceOp("k", "kernel", us, 0, "cudaLaunchKernel", 0)])
            for i, us in enumerate([5.0, 1.0, 4.0, 2.0, 3.0])]
    assert trace.median_forward(fwds) is fwds[4]  # 3.0: two forwards faster, two slower


def test_tied_forwards_tie_on_every_python(h200):
    """Two forwards with the same device time, to the nanosecond: a plain left-to-right sum makes the third
    899.5239999999999 µs on Python 3.11 (899.524 on 3.12), which changed which forward the median was, so
    `check` here disagreed with a capture made on 3.12. The sum is correctly rounded: they tie, and the
    median is the later of the two in the sort, as the capture chose."""
    fwds = trace.forwards(h200("sage-tie"), LABEL)
    assert [f.device_us for f in fwds] == [900.454, 899.524, 899.524]
    assert trace.median_forward(fwds) is fwds[2]


def test_a_summary_is_what_its_trace_says(h200):
    """What the pages read of a capture: the median forward's ops and device time, every forward's count, the
    median CPU time."""
    fwds = trace.forwards(h200("flash"), LABEL)
    summary = trace.summarize(fwds)
    assert summary["ops_per_forward_each"] == [1, 1, 1] and summary["forward_device_us"] == pytest.approx(96.416)
    assert summary["ops"] == [op.__dict__ for op in trace.median_forward(fwds).ops]
    assert summary["cpu_forward_us"] == sorted(f.cpu_us for f in fwds)[1]


def test_bad_traces_raise_one_clear_error(tmp_path, fixtures_dir, h200):
    with pytest.raises(trace.TraceError, match="missing"):
        trace.load(tmp_path / "nope.trace.json.gz")
    truncated = tmp_path / "cut.trace.json.gz"
    truncated.write_bytes((fixtures_dir / "h200-naive.trace.json.gz").read_bytes()[:500])
    with pytest.raises(trace.TraceError, match="unreadable"):
        trace.load(truncated)
    notrace = tmp_path / "x.trace.json.gz"
    notrace.write_bytes(gzip.compress(b'{"hello": 1}'))
    with pytest.raises(trace.TraceError, match="traceEvents"):
        trace.load(notrace)
    with pytest.raises(trace.TraceError, match="no forward annotated"):
        trace.forwards(h200("naive"), "some_other_label")
