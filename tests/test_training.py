"""The backward pass (autograd's thread) and context parallelism on two GPUs, on real H200 traces."""
import copy
import json
import xml.etree.ElementTree as ET

import pytest

from attnprof.analysis import kernel_names, trace
from attnprof.model import names, store
from attnprof.analysis import records
from attnprof.model.stages import select
from attnprof.cli import main
from attnprof.site.render import plots
from attnprof.site.build import Build
from attnprof.site.registry import expand
from attnprof.model.procedure import BWD_LABEL, LABEL
from attnprof.text import escape

BWD = BWD_LABEL


# ---- the backward, launched from autograd's thread -----------------------------------------------

def test_backward_launches_are_on_autograd_thread_not_the_calling_one(h200):
    t = h200("flash-bwd")
    own = trace.forwards(t, BWD)
    followed = trace.forwards(t, BWD, follow_autograd=True)
    assert len(own) == len(followed) == 3
    assert [len(b.ops) for b in own] == [0, 0, 0]  # the calling thread only waits
    assert [len(b.ops) for b in followed] == [5, 5, 5]
    kernels = [op.name for op in followed[0].ops]
    for op, kernel in zip(kernels[2:], ["flash_bwd_dot_do_o_kernel", "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
                                        "flash_bwd_convert_dq_kernel"]):
        assert f"pytorch_flash::{kernel}<" in op
    assert [op.launch_start_us for op in followed[0].ops] == sorted(op.launch_start_us for op in followed[0].ops)
    ann = next(e for e in t["traceEvents"] if e.get("cat") == "user_annotation" and e["name"] == BWD)
    engine_tids = {e["tid"] for e in t["traceEvents"] if e.get("cat") == "cpu_op"
                   and e["name"].startswith(trace.AUTOGRAD_ENGINE)}
    assert engine_tids and ann["tid"] not in engine_tids


def test_forwards_in_the_same_trace_are_counted_as_before(h200):
    fwds = trace.forwards(h200("flash-bwd"), LABEL)
    assert [len(f.ops) for f in fwds] == [1, 1, 1] and "flash_fwd_kernel" in fwds[0].ops[0].name


def test_naive_backward_op_by_op(h200):
    bwd = trace.forwards(h200("naive-bwd"), BWD, follow_autograd=True)[0]
    kinds = [op.kind for op in bwd.ops]
    assert kinds == ["kernel", "memset", "kernel", "kernel", "kernel", "memcpy", "kernel", "kernel", "kernel",
                     "kernel", "kernel"]
    nodes = {c.name.split(": ")[-1] for c in bwd.cpu_ops if c.name.startswith(trace.AUTOGRAD_ENGINE)}
    assert {"BmmBackward0", "SoftmaxBackward0", "MaskedFillBackward0", "MulBackward0"} <= nodes
    memcpy = next(op for op in bwd.ops if op.kind == "memcpy")
    owner = [c.name for c in bwd.cpu_ops if c.name.startswith(trace.AUTOGRAD_ENGINE)
             and c.start_us <= memcpy.launch_start_us <= c.start_us + c.duration_us]
    assert owner == [f"{trace.AUTOGRAD_ENGINE}: MaskedFillBackward0"]


def test_following_autograd_ignores_launches_outside_the_range(h200):
    t = copy.deepcopy(h200("flash-bwd"))
    ann = next(e for e in t["traceEvents"] if e.get("cat") == "user_annotation" and e["name"] == BWD)
    engine = next(e for e in t["traceEvents"] if e.get("cat") == "cpu_op" and e["name"].startswith(trace.AUTOGRAD_ENGINE))
    kernel = next(e for e in t["traceEvents"] if e.get("cat") == "kernel")
    before = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": engine["pid"], "tid": engine["tid"],
              "ts": ann["ts"] - 50, "dur": 5, "args": {"correlation": 10**9}}
    other_process = dict(before, pid="elsewhere", ts=ann["ts"] + 1, args={"correlation": 10**9 + 1})
    t["traceEvents"] += [before, other_process] + [dict(kernel, args=dict(kernel["args"], correlation=c))
                                                   for c in (10**9, 10**9 + 1)]
    assert [len(b.ops) for b in trace.forwards(t, BWD, follow_autograd=True)] == [5, 5, 5]


def test_backward_summaries_match_their_traces():
    for stage in select(backward=True):
        record = names.backward_record(stage)
        s = records.load_summary(record)
        bwds = trace.forwards(trace.load(store.trace_path(store.CAPTURES, record)), BWD, follow_autograd=True)
        assert s["ops_per_backward_each"] == [len(b.ops) for b in bwds], stage
        assert s["ops"] == [op.__dict__ for op in trace.median_forward(bwds).ops], stage
        assert s["ops_on_calling_thread_each"] == [0, 0, 0], stage
        assert all(v < 1e-2 for v in s["grad_rel_err"].values()), stage  # bf16 operands, NaN fails too


def test_what_the_backends_save():
    def saved(stage):
        return json.loads(store.summary_path(store.CAPTURES, names.backward_record(stage)).read_text())
    b, h, n, d = saved("naive")["shape"]
    naive = saved("naive")
    assert any(r["shape"] == [b, h, n, n] for r in naive["saved"])  # the S x S probabilities
    assert naive["memory"]["held_after_forward_bytes"] >= b * h * n * n * 2
    for stage in ("efficient", "flash", "cudnn"):
        s = saved(stage)
        assert not any(n * n in (r["shape"][-1] * r["shape"][-2] if len(r["shape"]) > 1 else 0,) for r in s["saved"])
        lse = [r for r in s["saved"] if r["dtype"] == "float32"]
        assert lse and lse[0]["bytes"] == b * h * n * 4, stage  # one float per query row
        assert s["memory"]["held_after_forward_bytes"] < naive["memory"]["held_after_forward_bytes"] / 10


def test_in_place_masking_is_allowed_by_autograd_and_saves_what_naive_saves():
    naive, inplace = (records.load_summary(names.backward_record(stage)) for stage in ("naive", "inplace"))
    assert "unavailable" not in inplace  # masked_fill_ overwrote a tensor that no op had saved
    assert inplace["saved"] == naive["saved"]
    assert [op["name"] for op in inplace["ops"]] == [op["name"] for op in naive["ops"]]


def test_fwdbwd_arrows_link_the_forward_op_to_its_backward(h200):
    t = h200("flash-bwd")
    starts = {e["id"]: e for e in t["traceEvents"] if e.get("cat") == "fwdbwd" and e.get("ph") == "s"}
    ends = [e for e in t["traceEvents"] if e.get("cat") == "fwdbwd" and e.get("ph") == "f"]
    assert ends and all(e["id"] in starts for e in ends)
    ops = [e for e in t["traceEvents"] if e.get("cat") == "cpu_op"]
    def at(ev):
        return {o["name"] for o in ops if o["tid"] == ev["tid"] and o["ts"] <= ev["ts"] <= o["ts"] + o["dur"]}
    assert any("aten::_scaled_dot_product_flash_attention" in at(starts[e["id"]])
               and any(n.startswith(trace.AUTOGRAD_ENGINE) for n in at(e)) for e in ends)


def test_backward_kernel_names_decode():
    cases = {
        "void pytorch_flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 4, 4, false, "
        "false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> > >"
        "(pytorch_flash::Flash_bwd_params, int)": ("FlashAttention-2 (PyTorch's copy)", kernel_names.NONE),
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0":
            ("cuDNN (fused flash attention)", kernel_names.TENSOR),
        "fmha_cutlassB_bf16_aligned_64x64_k64_seqaligned_sm80(PyTorchMemEffAttention::AttentionBackwardKernel"
        "<cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, true, 64, 64, 64, true>::Params)":
            ("memory-efficient attention (xFormers / CUTLASS)", kernel_names.TENSOR),
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)": ("NCCL", kernel_names.NONE),
    }
    for name, (library, unit) in cases.items():
        e = kernel_names.explain(name)
        assert (e["library"], e["math_unit"]) == (library, unit), name
    assert "backward" in kernel_names.explain("fmha_cutlassB_bf16_aligned_64x64_k64_seqaligned_sm80")["summary"]
    ag = kernel_names.explain("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")["summary"]
    assert "(AllGather, algorithm RING, protocol LL" in ag
    assert kernel_names.fingerprint(["cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1"
                              "_cga1x1x1_kernel0_0"]) == "cudnn"


# ---- two ranks -----------------------------------------------------------------------------------

def test_each_rank_of_a_two_gpu_capture_counts_its_own_forward(h200):
    t = h200("h200x2-cp-allgather-32768")
    counts, flash_grids = [], []
    for rank in (0, 1):
        fwds = trace.forwards(trace.rank_trace(t, rank), LABEL)
        assert len(fwds) == 3 and len({len(f.ops) for f in fwds}) == 1
        ops = fwds[0].ops
        assert sum(trace.is_communication(op.name) for op in ops) == 1
        assert any(op.name.startswith("ncclDevKernel_AllGather") for op in ops)
        flash_grids.append([op.grid[0] for op in ops if "flash_fwd_kernel" in op.name])
        counts.append(len(ops))
    assert counts == [17, 15]  # rank 0 merges a partial result (half its queries) at the second step
    assert flash_grids == [[128, 64], [128, 128]]  # 16,384 local queries in blocks of 128; then half of them
    with pytest.raises(trace.TraceError, match="no events of rank 2"):
        trace.rank_trace(t, 2)


def test_ranks_share_one_clock_and_start_together(h200):
    t = h200("h200x2-cp-allgather-32768")
    starts = [[f.start_ts for f in trace.forwards(trace.rank_trace(t, r), LABEL)] for r in (0, 1)]
    durations = [f.device_us for f in trace.forwards(trace.rank_trace(t, 0), LABEL)]
    for a, b in zip(*starts):  # a barrier releases both ranks; their forwards overlap in time
        assert abs(a - b) < min(durations)


def test_alltoall_rotation_uses_send_recv(h200):
    t = h200("h200x2-cp-alltoall-131072")
    for rank in (0, 1):
        ops = trace.forwards(trace.rank_trace(t, rank), LABEL)[0].ops
        comm = [op.name for op in ops if trace.is_communication(op.name)]
        assert len(comm) == 1 and comm[0].startswith("ncclDevKernel_SendRecv")


def test_overlap_is_interval_arithmetic():
    def op(name, start, dur):
        return trace.DeviceOp(name, "kernel", dur, start, "cudaLaunchKernel", 0.0)
    ops = [op("flash_fwd_kernel", 10, 100), op("ncclDevKernel_AllGather_RING_LL", 0, 30),
           op("ncclDevKernel_AllGather_RING_LL", 20, 20), op("copy", 200, 10), op("ncclDevKernel_SendRecv", 205, 10)]
    o = trace.overlap(ops)
    assert o["communication_us"] == 40 + 10  # [0, 40) and [205, 215), each counted once
    assert o["overlap_us"] == 30 + 5 and o["exposed_us"] == 15
    assert o["compute_us"] == 110 and o["hidden_fraction"] == pytest.approx(35 / 50)
    assert trace.overlap([op("flash_fwd_kernel", 0, 5)])["hidden_fraction"] is None


def test_cp_summaries_match_their_traces():
    for record in records.CP.records():
        s = records.load_summary(record)
        t = trace.load(store.trace_path(store.CAPTURES, record))
        assert len(s["ranks"]) == s["world_size"] == 2
        for r in s["ranks"]:
            fwds = trace.forwards(trace.rank_trace(t, r["rank"]), LABEL)
            chosen = trace.median_forward(fwds)
            assert r["ops_per_forward_each"] == [len(f.ops) for f in fwds], record
            assert r["overlap"] == pytest.approx(trace.overlap(chosen.ops)), record
            assert r["rel_err_rows"] < 1e-2, record
        assert s["speedup"] == pytest.approx(s["single_gpu"]["event_median_us"] / s["cp_event_median_us"])
        pairs = [r["causal_pairs"] for r in s["ranks"]]
        n = s["shape"][2]
        assert sum(pairs) == n * (n + 1) // 2  # every (query, key) pair of the causal mask, once
        assert (pairs[0] == pairs[1]) == s["load_balance"], record


def test_merged_trace_names_a_lane_per_rank(h200):
    t = h200("h200x2-cp-allgather-32768")
    lanes = {e["args"]["name"] for e in t["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert {"rank 0 CPU", "rank 0 GPU 0", "rank 1 CPU", "rank 1 GPU 1"} <= lanes
    parts = [trace.rank_trace(t, r) for r in (0, 1)]
    for p in parts:
        p["traceEvents"] = [dict(e, args={k: v for k, v in e["args"].items() if k != "rank"}) for e in p["traceEvents"]]
    again = trace.merge_ranks(parts)
    assert [len(f.ops) for f in trace.forwards(trace.rank_trace(again, 1), LABEL)] == [15, 15, 15]


# ---- commands and site ----------------------------------------------------------------------------

def test_capture_cp_without_gpus_says_so_and_keeps_the_captures(tmp_path, capsys):
    kept = tmp_path / "cp-allgather-w2-1x16x32768x128.json"
    kept.write_text("{}")
    assert main(["capture", "cp", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs 2 CUDA GPUs" in err and "kept" in err
    assert kept.read_text() == "{}"
    assert main(["capture", "cp", "--lengths", "1000,x"]) == 2
    assert "bad --lengths" in capsys.readouterr().err
    assert main(["capture", "cp", "--rotate", "ring"]) == 2
    assert "bad --rotate" in capsys.readouterr().err


def test_check_covers_backward_and_two_gpu_captures(tmp_path, capsys):
    assert records.problems() == {}
    folder = tmp_path / "captures"
    folder.mkdir()
    record = records.CP.records()[0]
    s = json.loads(store.summary_path(store.CAPTURES, record).read_text())
    (folder / f"{record}.json").write_text(json.dumps(dict(s, key="0" * 16)))
    problems = records.problems(folder)  # the one list that check and the site build refuse
    assert set(records.BACKWARD.records() + records.CP.records()) <= set(problems)
    assert "stale" in problems[record] and "capture cp" in problems[record]
    assert "missing" in problems["flash-bwd"] and "--backward flash" in problems["flash-bwd"]
    assert main(["check", "--captures", str(folder)]) == 1
    assert problems[record] in capsys.readouterr().out


def test_a_training_capture_that_cannot_be_used_renders_as_a_box():
    why = "capture 'flash-bwd' is stale: run it again"
    build = Build(problems={"flash-bwd": why, records.CP.records()[0]: why})
    assert "Capture not usable" in expand(build, "ops", ["flash-bwd"]) and escape(why) in expand(build, "ops", ["flash-bwd"])
    assert "Capture not usable" in expand(build, "compare", records.BACKWARD.records())
    assert expand(build, "value", ["flash-bwd", "ops"]).startswith("**(capture not usable")
    assert "Capture not usable" in expand(build, "trace", [records.CP.records()[0]])
    assert expand(build, "value", ["naive-bwd", "ops"]) == "11"  # the others render


def test_each_backward_over_forward_ratio_follows_from_the_two_times_its_row_gives():
    """The backward ÷ forward column divides by the forward of the backward's own trace, which a forward chapter's
    capture times apart (the memory-efficient forward differs between the two): the table gives that forward in
    the note folded under it, not beside the ratio (one number a quantity in the main text), and the ratio follows
    from the row's device time over it, as a reader would divide them."""
    from attnprof.text import us
    build = Build(problems={})
    table = expand(build, "compare", records.BACKWARD.records())
    assert us(build.summary("efficient-bwd")["forward_device_us"]) != us(build.summary("efficient")["forward_device_us"])
    number = lambda text: float(text.replace(",", "").split()[0]) * (1000 if text.split()[-1] == "ms" else 1)
    cells = [[c.strip() for c in l.split("|")[1:-1]] for l in table.splitlines() if l.startswith("| [")]
    folded = table.split('??? note "How the columns were measured, and the forwards the ratios divide by')[1]
    forwards = [l.split(": ", 1)[1] for l in folded.splitlines() if l.startswith("    - ")]
    assert len(cells) == len(forwards) == len(records.BACKWARD.records())
    for cell, forward in zip(cells, forwards):
        assert "÷" not in cell[6] and f"{number(cell[3]) / number(forward):.1f}×" == cell[6], (cell, forward)


def test_rank_timeline_is_well_formed_and_lines_the_ranks_up():
    record = "cp-allgather-w2-1x16x32768x128"
    build = Build(problems={})
    svg = plots.ranks_timeline(build.summary(record), plots.rank_forwards(build.summary(record), build.trace(record)))
    ns = "{http://www.w3.org/2000/svg}"
    drawings = ET.fromstring(svg).findall(f"{ns}svg")
    assert len(drawings) == 2  # wide, and narrow for a phone
    for root in drawings:
        texts = [t.text for t in root.iter(f"{ns}text")]
        assert {"rank 0 compute", "rank 0 NCCL", "rank 1 compute", "rank 1 NCCL"} <= set(texts)
        titles = [t.text for t in root.iter(f"{ns}title")]
        kernels = sum(op["kind"] == "kernel" for r in build.summary(record)["ranks"] for op in r["ops"])
        assert len(titles) == kernels and sum("AllGather" in t for t in titles) == 2


def test_backward_timeline_follows_autograd():
    build = Build(problems={})
    s = build.summary("flash-bwd")
    root = ET.fromstring(plots.timeline(s, build.forwards("flash-bwd")[1])).find("{http://www.w3.org/2000/svg}svg")
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text for r in root.iter(ns + "rect") if (t := r.find(ns + "title")) is not None]  # the bars'
    assert root.get("aria-label") == "flash backward trace"
    assert sum(t.startswith(f"{i}. ") for t in titles for i in range(1, len(s["ops"]) + 1)) == len(s["ops"]) == 5


def test_chapters_render_from_the_committed_captures(site):
    bwd = (site / "backward" / "index.html").read_text()
    assert "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel" in bwd and "ScaledDotProductFlashAttentionBackward0" in bwd
    assert 'aria-label="flash backward trace"' in bwd and "One backward of SDPA, flash backend" in bwd  # the trace, inline
    assert "Captured on NVIDIA H200" in bwd and "attnprof:" not in bwd
    two = (site / "two-gpus" / "index.html").read_text()
    assert "ncclDevKernel_AllGather_RING_LL" in two and "<code>SendRecv</code>" in two
    assert "attnprof:" not in two and two.count('aria-label="cp-') == 6  # three rank timelines, inline, each drawn wide and narrow
    assert "rank 0 NCCL" in two and "rank 1 compute" in two
