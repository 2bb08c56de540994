"""Context parallelism: ring attention over SDPA on several GPUs of one host, profiled on every rank.

`torch.distributed.tensor.experimental.context_parallel` shards q, k and v along the sequence and
patches `F.scaled_dot_product_attention`, so each rank computes attention for its queries while the
keys and values travel round the ring (an all-gather by default, or an all-to-all that passes each
shard to the next rank). It handles the flash, efficient and cuDNN SDPA ops (not the math path).
With a causal mask it deals the sequence out head-and-tail (rank r keeps chunks r and 2W-1-r of 2W)
so that every rank has the same causal work.

One process per GPU (torch.multiprocessing, NCCL); each rank profiles its own forwards and the
records are merged into one trace whose ranks are lanes of one timeline. Rank 0 also times the same
attention on one GPU at the same length, in the same run, for the speedup.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
from pathlib import Path

import torch

from ..analysis import records, trace
from ..model import store
from ..model.names import CP_BACKEND, CP_HEAD_DIM, CP_HEADS, cp_record, cp_settings
from ..model.procedure import EVENT_REPS, LABEL, SCHEDULE, WARMUP_CALLS, CaptureError
from ..model.snippets import code_hash

HEADS, HEAD_DIM, BACKEND = CP_HEADS, CP_HEAD_DIM, CP_BACKEND  # BACKEND: pinned on every rank and for one GPU
REF_ROWS = 32  # query rows checked against float64 (a full S x S float64 reference does not fit at these lengths)
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows_reference(q, k, v, rows):
    """Causal attention in float64 for the query positions `rows` only, against every key."""
    q64, k64, v64 = (t.to(torch.float64) for t in (q[:, :, rows], k, v))
    scores = q64 @ k64.transpose(-2, -1) / HEAD_DIM ** 0.5
    future = torch.arange(k.shape[2], device=q.device)[None, :] > rows[:, None]
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v64


def _ranges(positions) -> list[list[int]]:
    """Sorted positions as [first, last] runs."""
    runs = []
    for p in positions:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return runs


def _timed_us(fn, barrier):
    """Microseconds of fn() on this rank (CUDA events; wall clock on a CPU), all ranks starting together."""
    from .bench import _elapsed_us
    barrier()
    return _elapsed_us(fn)


def _worker(rank, world, configs, tmp, port):
    """One rank: for each (length, rotate, balanced), a one-GPU baseline on rank 0, then the CP forward:
    check, time, profile. Writes tmp/<record>-rank<r>.json and .trace.json."""
    os.environ.update(NO_MULTICAST, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import _cp_options, context_parallel_unshard, set_rotate_method
    from torch.profiler import ProfilerActivity, profile, record_function, schedule
    from .bench import peak_extra_bytes
    from .capture import key_average_rows
    from .numerics import make_inputs, relative_error
    from ..model.snippets import load_snippet
    only = load_snippet("sdpa").only  # the same backend pinning the ladder's stages use

    cuda = torch.cuda.is_available()  # without CUDA (a launcher check on a CPU): gloo, wall clock
    if cuda:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world, **({"device_id": device} if cuda else {}))
    mesh = init_device_mesh(device.type, (world,))
    barrier = (lambda: dist.barrier(device_ids=[rank])) if cuda else dist.barrier
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    baseline = {}
    for seq_len, rotate, balanced in configs:
        record = cp_record(seq_len, world, rotate, balanced)
        shape = (1, HEADS, seq_len, HEAD_DIM)
        q, k, v = make_inputs(shape, torch.bfloat16, device, seed=seq_len)  # the same full inputs on every rank
        result = {"rank": rank, "device": torch.cuda.get_device_name(rank) if cuda else "cpu"}
        with only(BACKEND):
            single = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
            if rank == 0 and seq_len not in baseline:  # one GPU, same length, same backend, same inputs
                for _ in range(3):
                    single()
                times = [_timed_us(single, lambda: None) for _ in range(EVENT_REPS // 2)]
                baseline[seq_len] = {"event_median_us": statistics.median(times),
                                     "peak_extra_bytes": peak_extra_bytes(single)}
            if rank == 0:
                result["single_gpu"] = baseline[seq_len]
                single_out = single()  # before the context: inside it, SDPA is the ring version
            barrier()
            _cp_options.enable_load_balance = balanced
            set_rotate_method(rotate)
            cq, ck, cv = q.clone(), k.clone(), v.clone()
            pos = torch.arange(seq_len, device=device).view(1, 1, seq_len, 1)  # sharded like q: the positions it holds
            with context_parallel(mesh, buffers=[cq, ck, cv, pos], buffer_seq_dims=[2, 2, 2, 2]):
                forward = lambda: F.scaled_dot_product_attention(cq, ck, cv, is_causal=True)
                out = forward()
                (full,) = context_parallel_unshard(mesh, [out], [2])
                rows = torch.linspace(0, seq_len - 1, REF_ROWS, device=device).long()
                result["rel_err_rows"] = relative_error(full[:, :, rows], _rows_reference(q, k, v, rows))
                if rank == 0:
                    result["rel_err_vs_single_gpu"] = relative_error(full, single_out)
                    del single_out
                del out, full
                positions = pos.flatten().tolist()
                result.update({"local_shape": list(cq.shape), "positions": _ranges(positions),
                               "causal_pairs": sum(p + 1 for p in positions)})  # (query, key) pairs its queries see
                for _ in range(WARMUP_CALLS):
                    forward()
                sync()
                times = [_timed_us(forward, barrier) for _ in range(EVENT_REPS // 2)]
                result["peak_extra_bytes"] = peak_extra_bytes(forward)
                barrier()
                with profile(activities=activities, schedule=schedule(**SCHEDULE),
                             record_shapes=True) as prof:
                    for _ in range(sum(SCHEDULE[k] for k in ("wait", "warmup", "active"))):
                        barrier()  # every rank starts each forward together
                        with record_function(LABEL):
                            forward()
                        sync()
                        prof.step()
                prof.export_chrome_trace(str(Path(tmp) / f"{record}-rank{rank}.trace.json"))
            result.update({"event_median_us": statistics.median(times), "event_times_us": times,
                           "key_averages": key_average_rows(prof.key_averages())})
        _cp_options.enable_load_balance = True
        (Path(tmp) / f"{record}-rank{rank}.json").write_text(json.dumps(result))
        del q, k, v, cq, ck, cv
        if cuda:
            torch.cuda.empty_cache()
    barrier()
    dist.destroy_process_group()


def _assemble(tmp: Path, record: str, world: int, settings: dict, env: dict) -> dict:
    """One record with ranks: each rank's forward (ops counted by correlation inside the annotation),
    its overlap of communication and compute, and the load balance of the causal mask."""
    results = [json.loads((tmp / f"{record}-rank{r}.json").read_text()) for r in range(world)]
    merged = trace.merge_ranks([trace.load(tmp / f"{record}-rank{r}.trace.json") for r in range(world)])
    ranks = [{k: v for k, v in res.items() if k not in ("single_gpu", "event_times_us", "causal_pairs")}
             for res in results]  # each rank's forward, op counts and overlap are read off the merged trace
    summary = {"record": record, "stage": "cp", "title": "Context parallelism (ring attention over SDPA)",
               "shape": settings["shape"], "dtype": "bf16", "label": LABEL, "settings": settings,
               "key": records.CP.key(record), "code": records.CP.code(record), "world_size": world,
               "rotate": settings["rotate"], "load_balance": settings["load_balance"], "backend": BACKEND,
               "ranks": ranks, "single_gpu": results[0]["single_gpu"], **env}
    return summary, merged


def configs_for(lengths, rotations=("allgather",), unbalanced_at=None):
    """(length, rotate, balanced) for each length and rotation, plus one unbalanced run if asked."""
    cfgs = [(s, rot, True) for s in lengths for rot in rotations]
    if unbalanced_at:
        cfgs.append((unbalanced_at, rotations[0], False))
    return cfgs


def capture(configs, world: int, out_dir, cpu_check=False) -> list[dict]:
    """Run every config on `world` GPUs (one process each) and write one record per config.
    Without enough GPUs, says so in one line and keeps the committed captures. `cpu_check` runs the
    launcher on CPU processes (gloo) instead, for a test; it writes nothing."""
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < world and not cpu_check:
        raise CaptureError(f"context parallelism over {world} GPUs needs {world} CUDA GPUs and this machine has "
                           f"{have}: the committed context-parallel captures are kept")
    import torch.multiprocessing as mp
    from .capture import environment
    os.environ.update(NO_MULTICAST)
    env = {**(environment() if not cpu_check else {}), "source_hash": code_hash(__file__)}  # a stamp of what ran
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            mp.spawn(_worker, args=(world, list(configs), tmp, _free_port()), nprocs=world, join=True)
        except Exception as e:  # a rank that failed: the configs it finished are still written below
            print(f"context parallel run stopped: {type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}", flush=True)
        if cpu_check:
            return [json.loads(p.read_text()) for p in sorted(Path(tmp).glob("*-rank*.json")) if ".trace." not in p.name]
        for seq_len, rotate, balanced in configs:
            record = cp_record(seq_len, world, rotate, balanced)
            try:
                summary, merged = _assemble(Path(tmp), record, world, cp_settings(seq_len, world, rotate, balanced), env)
            except (OSError, ValueError) as e:
                results.append({"record": record, "error": f"{type(e).__name__}: {e}"})
                continue
            store.write_trace(out_dir, record, merged)
            store.write_summary(out_dir, summary)
            results.append(summary)
    return results
