"""Checked sentences about a model's layer (docs/own-attention.md, "A model's attention"): what a
transformers Llama layer runs around its attention kernel, read off the committed layer captures."""
from __future__ import annotations

from ...analysis import decide, kernel_names, oplist, summary
from ...text import escape, shape, us
from ..build import Build
from .core import Flip, Statement, claim
from .edits import events, in_trace
from .methods import above
from .wording import pct, times

EAGER, SDPA = "layer.eager", "layer.sdpa"


def _where(s: dict) -> str:
    return f"profiler device time of the forward the trace draws, {shape(s['shape'])} {escape(s['dtype'])}"


@claim("layer-around", reads=lambda record: [record],
       flip=lambda record: Flip(f"{record}.trace.json.gz", in_trace("kernel", "fprop", 20.0)))  # the attention outweighs the rest
def layer_around(build: Build, record: str = SDPA) -> Statement:
    """The layer's one attention kernel against everything the layer runs around it."""
    s = build.summary(record)  # the forward the page's trace draws
    kernels = summary.kernels(s)
    attention = [op for op in kernels if kernel_names.is_attention(op["name"])]
    if not attention:
        return Statement(f"{record} ran no fused attention kernel", False, f"kernels: {len(kernels)}")
    kernel = attention[0]
    rest = s["forward_device_us"] - kernel["duration_us"]
    library = kernel_names.explain(kernel["name"])["library"]
    text = (f"Under <code>{escape(s['function'])}</code>, most of the layer's device time is spent around its attention kernel, not in it. "
            f"Of the {len(s['ops'])} device ops of one forward, one is the attention: {library}'s "
            f"`{kernel_names.label(kernel['name'])}`, {us(kernel['duration_us'])}. The other "
            f"{len(s['ops']) - 1}, the projections, RoPE and the casts, take {us(rest)}, "
            f"{times(rest / kernel['duration_us'])} the attention kernel's time ({_where(s)}).")
    lesson = f"The layer spends most device time around its attention kernel, {us(rest)} against {us(kernel['duration_us'])}"
    return Statement(text, len(attention) == 1 and rest > kernel["duration_us"], lesson=lesson,
                     rests_on=f"{len(attention)} attention kernels; {rest:.1f} µs around {kernel['duration_us']:.1f} µs")


@claim("layer-eager", reads=[EAGER, SDPA],
       flip=Flip(f"{EAGER}.trace.json.gz", in_trace("kernel", "softmax", 0.1)))  # a softmax quicker than the fused kernel
def layer_eager(build: Build) -> Statement:
    """Eager's float32 softmax against sdpa's whole attention kernel."""
    eager, sdpa = build.summary(EAGER), build.summary(SDPA)  # the forwards the pages draw
    softmax = [op for op in summary.kernels(eager) if kernel_names.explain(op["name"])["library"] == "ATen softmax"]
    fused = [op for op in summary.kernels(sdpa) if kernel_names.is_attention(op["name"])]
    if len(softmax) != 1 or len(fused) != 1:
        return Statement("eager has no single softmax kernel, or sdpa no single attention kernel", False,
                         f"{len(softmax)} softmax, {len(fused)} fused kernels")
    soft, kernel = softmax[0], fused[0]
    in_fp32 = kernel_names.explain(soft["name"])["dtype"] == "fp32"
    text = (f"Under `eager` the same layer takes {us(eager['forward_device_us'])} of device time per forward, "
            f"{times(eager['forward_device_us'] / sdpa['forward_device_us'])} what it takes under `sdpa`; its "
            f"softmax alone, in float32, takes {us(soft['duration_us'])}, "
            f"{times(soft['duration_us'] / kernel['duration_us'])} the time of sdpa's whole attention kernel "
            f"({_where(eager)}).")
    lesson = (f"under `eager` the same layer takes {times(eager['forward_device_us'] / sdpa['forward_device_us'])} "
              f"the device time it takes under `sdpa`; its float32 softmax alone outlasts sdpa's whole attention kernel")
    return Statement(text, in_fp32 and soft["duration_us"] > kernel["duration_us"]
                     and eager["forward_device_us"] > sdpa["forward_device_us"], lesson=lesson,
                     rests_on=f"softmax dtype {kernel_names.explain(soft['name'])['dtype']}, {soft['duration_us']:.1f} µs "
                     f"against {kernel['duration_us']:.1f} µs; eager {eager['forward_device_us']:.1f} µs, sdpa "
                     f"{sdpa['forward_device_us']:.1f} µs")


@claim("layer-idle", reads=lambda record: [record],
       flip=lambda record: Flip(f"{record}.json", events(0.5, of="forward_device_us_each")))  # one call below its kernels
def layer_idle(build: Build, record: str = SDPA) -> Statement:
    """A layer's forward leaves the GPU waiting for its launches: idle for most of the profiled span of the forward
    its page draws, and one call, timed without the profiler, wholly above the layer's device time."""
    s = build.summary(record)
    g = oplist.gaps(s)
    one = decide.samples(s["event_times_us"], decide.ONE_CALL)
    device = decide.samples(s["forward_device_us_each"], decide.DEVICE)
    text = (f"Under <code>{escape(s['function'])}</code> the GPU ran the layer's {len(s['ops'])} device ops for "
            f"{us(g.busy_us)} of a {us(g.span_us)} span from first launch to last op end, idle {pct(g.idle_share)} of "
            f"it (profiled: the profiler slows the CPU's launches). Without the profiler one call takes "
            f"{one.text(us)} (CUDA events, the capture's own run, median and p10–p90 of {one.n} calls) against "
            f"{device.text(us)} of device time ({_where(s)}): the rest of the call is the CPU's work of launching "
            f"them")
    lesson = f"under `{escape(s['function'])}` the GPU waits for launches most of the profiled span"
    return Statement(text, g.idle_share > 0.5 and above(one, device), lesson=lesson,
                     rests_on=f"idle {g.idle_share:.2f} of the span; one call {one}, device {device}")
