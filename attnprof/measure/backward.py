"""Backward captures: profile forward + backward of one stage, with the backward annotated on its own.

Each profiled step runs one annotated forward (`attention_forward`) and one annotated backward
(`attention_backward`). Autograd runs a CUDA backward on its own thread, so the backward's device work
is counted by correlation of the launches made inside its range on the thread that called
`backward()` and on autograd's engine thread (`trace.forwards(..., follow_autograd=True)`).
Writes `<record>.json` and `<record>.trace.json.gz` (record = `<stage>-bwd` at the default shape).
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch.profiler import record_function

from ..model import names, store
from ..analysis import trace
from ..model.procedure import BWD_LABEL, DEFAULT_DTYPE, EVENT_REPS, LABEL
from ..model.stages import DEFAULT_SHAPE, ProviderUnavailable, get_stage, select
from ..text import first_line
from .bench import interleaved, sync
from .capture import cannot_run, each, head
from .profiling import key_average_rows, profiled
from .numerics import default_device, make_inputs, reference, relative_error, torch_dtype


def _clear_grads(tensors):
    for t in tensors:
        t.grad = None


# --8<-- [start:profile]
def backward_step(forward, grad, inputs):
    """One step of the profiling loop (profile_steps, as for the forward): one annotated forward and
    one annotated backward, each waited for."""
    def step():
        with record_function(LABEL):
            out = forward()
        sync()
        with record_function(BWD_LABEL):  # autograd launches the kernels from its own thread
            out.backward(grad)
        sync()
        _clear_grads(inputs)  # outside both ranges: each backward writes fresh gradients
    return step
# --8<-- [end:profile]


def saved_for_backward(forward, inputs) -> list[dict]:
    """Every tensor autograd saves for the backward during one forward (saved_tensors_hooks), with
    its shape, dtype and bytes; the inputs q, k, v and the output are named as such."""
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = forward()
    known = {t.data_ptr(): name for t, name in zip(inputs, "qkv")}
    known.setdefault(out.data_ptr(), "output")
    rows, seen = [], set()
    for t in saved:
        key = (t.data_ptr(), tuple(t.shape), t.dtype)
        if key in seen:
            continue
        seen.add(key)
        what = known.get(t.data_ptr(), "scalar" if t.dim() == 0 else "intermediate")
        rows.append({"what": what, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
                     "bytes": t.numel() * t.element_size()})
    del out, saved
    return rows


def memory(forward, grad, inputs) -> dict:
    """Bytes beyond what was live before: held between forward and backward (output and saved
    tensors), peak of the forward, and peak of the backward (gradients included)."""
    if not torch.cuda.is_available():
        return {}
    _clear_grads(inputs)
    sync()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = forward()
    sync()
    held, fwd_peak = torch.cuda.memory_allocated() - before, torch.cuda.max_memory_allocated() - before
    torch.cuda.reset_peak_memory_stats()
    out.backward(grad)
    sync()
    bwd_peak = torch.cuda.max_memory_allocated() - before
    del out
    _clear_grads(inputs)
    return {"held_after_forward_bytes": held, "peak_forward_bytes": fwd_peak, "peak_backward_bytes": bwd_peak}


def time_backward(forward, grad, inputs, reps) -> list[float]:
    """Microseconds of each backward alone (CUDA events around `backward()`), a fresh forward before each."""
    times = []
    for _ in range(reps):
        out = forward()
        if torch.cuda.is_available():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out.backward(grad)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        else:
            import time
            t0 = time.perf_counter()
            out.backward(grad)
            times.append((time.perf_counter() - t0) * 1e6)
        _clear_grads(inputs)
    return times


def grad_errors(q, k, v, out, grad) -> dict:
    """Relative error of the output and of each gradient against float64 autograd on the same inputs."""
    q64, k64, v64 = (t.detach().to(torch.float64).requires_grad_() for t in (q, k, v))
    ref = reference(q64, k64, v64, graph=True)
    ref.backward(grad.to(torch.float64))
    return {"out": relative_error(out, ref.detach()),
            **{f"d{n}": relative_error(t.grad, t64.grad) for n, t, t64 in zip("qkv", (q, k, v), (q64, k64, v64))}}


def upstream(q):
    """The upstream gradient dL/dout every backward here is handed: fixed, from a seeded generator."""
    gen = torch.Generator(device="cpu").manual_seed(1)
    return torch.randn(q.shape, generator=gen).to(device=q.device, dtype=q.dtype)


def measured(forward, grad, inputs) -> tuple[dict, object, list[float]]:
    """What a backward's timing rests on: the profiled trace and key_averages (profile_steps over
    forward + backward steps), and one `backward()` call's CUDA-event time, EVENT_REPS times."""
    events, averages = profiled(backward_step(forward, grad, inputs))
    return events, averages, time_backward(forward, grad, inputs, EVENT_REPS)


ROUNDS = 10  # the ranking's rounds: EVENT_REPS // ROUNDS backward calls of each stage a round


def ranking(shape=DEFAULT_SHAPE, dtype_name=DEFAULT_DTYPE, rounds=ROUNDS, seed=None):
    """The ranking's samples, for a run repeated in separate processes: every backward stage at `shape`,
    by device time per profiled backward (counted as a capture counts it) and by one call's CUDA-event
    time. The stages' CUDA-event times are taken interleaved (bench.interleaved: `rounds` rounds, each stage
    once a round in a shuffled order, a round at a throttled clock dropped for all), then each stage is
    profiled. A generator (measure/repeat.py): it yields once every stage is loaded, compiled and run once."""
    ready, rows = [], {}
    for name in select(backward=True):
        stage = get_stage(name)
        q, k, v = inputs = [t.requires_grad_() for t in make_inputs(shape, torch_dtype(dtype_name), default_device())]
        try:
            forward, grad = stage.prepare(q, k, v), upstream(q)
            with stage.context():
                forward().backward(grad)
                sync()
            _clear_grads(inputs)
            ready.append((stage, forward, grad, inputs))
        except (ProviderUnavailable, RuntimeError) as e:
            rows[name] = {"stage": name, "error": f"{type(e).__name__}: {first_line(e)}"[:300]}
    yield

    def arm(stage, forward, grad, inputs):
        def measure():
            with stage.context():
                return {"event_times_us": time_backward(forward, grad, inputs, EVENT_REPS // rounds)}
        return measure
    timed = interleaved({r[0].name: arm(*r) for r in ready}, rounds, seed=seed)
    for stage, forward, grad, inputs in ready:
        row = {"stage": stage.name, **timed[stage.name]}
        if "error" not in row:
            try:
                with stage.context():
                    events, _ = profiled(backward_step(forward, grad, inputs))
                row["backward_device_us_each"] = trace.summarize_backward(events, BWD_LABEL, LABEL)["backward_device_us_each"]
            except RuntimeError as e:
                row = {"stage": stage.name, "error": f"{type(e).__name__}: {first_line(e)}"[:300]}
        rows[stage.name] = row
    return {"shape": list(shape), "dtype": dtype_name, "rows": [rows[name] for name in select(backward=True)]}


def capture_backward(name, shape, dtype_name, out_dir, device="cuda") -> dict:
    """Capture forward + backward of one stage; returns the summary (also written)."""
    stage = get_stage(name)
    out_dir = Path(out_dir)
    summary = head(stage, names.backward_record(name, shape, dtype_name), shape, dtype_name,
                   names.backward_settings(shape, dtype_name), BWD_LABEL)
    summary.update({"pass": "backward", "forward_label": LABEL, "follow_autograd": True})
    q, k, v = inputs = [t.requires_grad_() for t in make_inputs(shape, torch_dtype(dtype_name), device)]
    try:
        forward = stage.prepare(q, k, v)
    except ProviderUnavailable as e:
        return cannot_run(out_dir, summary, str(e))
    grad = upstream(q)
    with stage.context():
        try:  # a backward that autograd refuses (or a backend that cannot run) raises here
            out = forward()
            out.backward(grad)
            sync()
        except RuntimeError as e:
            return cannot_run(out_dir, summary, str(e).strip().splitlines()[0])
        summary["rel_err"] = relative_error(out, reference(q, k, v))
        summary["grad_rel_err"] = grad_errors(q, k, v, out.detach(), grad)
        del out
        _clear_grads(inputs)
        events, averages, times = measured(forward, grad, inputs)
        summary["memory"] = memory(forward, grad, inputs)
        try:
            summary["saved"] = saved_for_backward(forward, inputs)
        except Exception as e:  # a compiled forward may refuse the hooks: say so, keep the rest
            summary["saved_unavailable"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"

    summary.update({"event_times_us": times, "key_averages": key_average_rows(averages)})
    store.write_capture(out_dir, summary, events)  # last, and as a pair: a failure above leaves the old one
    return summary


def capture(stage_names, shape, dtype_name, out_dir) -> list[dict]:
    return each(stage_names, lambda name: capture_backward(name, shape, dtype_name, out_dir),
                lambda name: names.backward_record(name, shape, dtype_name), "backward capture")
