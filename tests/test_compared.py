"""The readers' worked example compared by the one rule: whether a stream's verdict holds beyond the host it was
measured on. Each test changes a copy of a record (in memory) and shows the words
turn."""
import copy

from attnprof.analysis import compare, timing
from attnprof.site.build import Build
from attnprof.site.pieces import compared

def _with_enqueue(record, factor):
    """A copy of a capture whose stream runs at the GPU's pace (back to back as its GPU-only samples) and whose
    unprofiled CPU enqueue samples are `factor` times its GPU-only median."""
    s = copy.deepcopy(Build(problems={}).summary(record))
    gpu = timing.record_verdict(s).gpu_only.median
    s["timing"]["back_to_back_us"] = list(s["timing"]["graph_us"])
    s["timing"]["enqueue_us"] = [factor * gpu] * len(s["timing"]["enqueue_us"])
    return s


def test_a_stream_verdict_inside_the_host_margin_says_so():
    near = _with_enqueue("window.sdpa", 0.6)  # the GPU only 1.7× the CPU's enqueue
    close = compare.metrics(near)
    assert close["stream_label"] == "GPU-bound (within 2×)" and "by less than the 2× margin" in close["stream_note"]
    far = compare.metrics(_with_enqueue("window.sdpa", 0.3))  # the GPU now 3.3× the CPU's enqueue
    assert far["stream_label"] == "GPU-bound" and far["stream_note"] is None and far["stream_decided"]
    md = compared.markdown(compare.diff(Build(problems={}).summary("auto"), near))
    assert "A stream of calls of B: GPU-bound on this host by less than the 2× margin" in md


def test_tflops_is_the_device_times_and_a_readers_function_has_none():
    """TFLOP/s counts causal attention FLOPs, so it is given for the site's stages, over the device time every page
    ranks by (in the diff as in the tables), and not for a reader's function (a window, a whole layer), whose work
    is its own."""
    from attnprof.analysis.flops import device_tflops
    from attnprof.site import registry
    from attnprof.site.pieces.captures import compare as compare_piece
    build = Build(problems={})
    auto, window = build.summary("auto"), build.summary("window.flex")
    assert compare.metrics(auto)["tflops"] == device_tflops(auto) and compare.metrics(window)["tflops"] is None
    registry.load()
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[4] for line in
            compare_piece(build, "flex", "window.flex").splitlines() if line.startswith("| ") and "---" not in line}
    assert rows["Sliding window, FlexAttention with a block mask"] == "—"
    assert rows["FlexAttention (torch.compile)"] == f"{device_tflops(build.summary('flex')):.0f}"
