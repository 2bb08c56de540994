"""python -m attnprof {capture,show,check,explain,which,verify,sweep,counters,notebooks,regenerate}: capture
attention profiles on a GPU, read them anywhere. Bad input is answered in one line."""
from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import time
from pathlib import Path

from .model import names, own, store
from .analysis import records
from .analysis.oplist import KEY_AVERAGES_HEADERS, KIND_LABEL
from .model.procedure import DEFAULT_DTYPE, CaptureError
from .model.stages import DEFAULT_SHAPE, DTYPES, LONG_SHAPE, STAGES, get_stage, parse_shape, select
from .text import shape, short, text_table, us


MINE = f"your captures' folder, looked in before the site's set of records (default: {own.DEFAULT_OUT})"


def show_text(summary) -> str:
    """A capture as `show` prints it: the per-forward op list and the key_averages table."""
    head = f"{summary['stage']} on {summary['device']} ({summary['capability']}), shape {summary['shape']}, {summary['dtype']}"
    if "unavailable" in summary:
        return f"{head}\ndid not run when captured: {summary['unavailable']}"
    ops = [(i, KIND_LABEL[op["kind"]], us(op["duration_us"]), short(op["name"], 100))
           for i, op in enumerate(summary["ops"], 1)]
    averages = [(short(r["name"], 50), r["calls"], us(r["self_cpu_us"]), us(r["cpu_total_us"]),
                 us(r["self_device_us"]), us(r["device_total_us"])) for r in summary["key_averages"]]
    return "\n".join([
        head,
        f"{summary['ops_per_forward']} device ops per forward; forward device time {us(summary['forward_device_us'])} "
        f"(profiler), {us(summary['event_median_us'])} (CUDA-event median); rel. error {summary['rel_err']:.2e}",
        "", "Per-forward device ops, in launch order:",
        text_table(["#", "kind", "time", "name"], ops),
        "", f"key_averages over {len(summary['ops_per_forward_each'])} profiled forwards, by self CUDA time:",
        text_table(KEY_AVERAGES_HEADERS, averages),
    ])


def needs_torch(command: str):
    """Commands that run attention need PyTorch; without it, one line says what to install."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise CaptureError(f"`python -m attnprof {command}` runs attention and needs PyTorch, which is not "
                           f"installed here: pip install -e '.[measure]'") from None


def probability(text: str) -> float:
    try:
        p = float(text)
    except ValueError:
        p = math.nan
    if not 0.0 <= p <= 1.0:  # NaN fails this too
        raise ValueError(f"bad dropout {text!r}: give a probability between 0 and 1, e.g. 0.1")
    return p


def cmd_capture_own(args) -> int:
    """`capture FILE.py:FUNCTION`: a reader's attention, profiled like a stage (attnprof/measure/own.py)."""
    if len(args.stages) != 1:
        raise ValueError("capture one FILE.py:FUNCTION at a time, without stage names")
    dims = parse_shape(args.shape)
    from .measure.own import capture_own
    out = args.out or own.DEFAULT_OUT
    written = capture_own(args.stages[0], dims, args.dtype, args.mask, args.reference, out)
    r = records.load_summary(written["record"], out)  # what was measured, and what it says read off the trace
    from .measure.verify import TOLERANCE
    extra = f", vs causal attention {r['rel_err_causal']:.2e}" if "rel_err_causal" in r else ""
    if not r["rel_err"] <= TOLERANCE[args.dtype]:  # NaN fails this too
        print(f"note: {r['record']} differs from itself in float64 by {r['rel_err']:.2e}, more than the "
              f"{TOLERANCE[args.dtype]:.0e} that `verify` allows {args.dtype}: check its numerics", file=sys.stderr)
    print(f"{r['record']}: {r['ops_per_forward']} ops/forward, {r['event_median_us']:.1f} us (event median), "
          f"rel err vs itself in float64 {r['rel_err']:.2e}{extra}; wrote {r['record']}.json and "
          f"{r['record']}.trace.json.gz into {out}/")
    return 0


def cmd_capture(args) -> int:
    needs_torch("capture")
    if any(".py" in s or ":" in s for s in args.stages):  # a reader's FILE.py:FUNCTION rather than stages
        return cmd_capture_own(args)
    if args.mask or args.reference:
        raise ValueError("--mask and --reference are for `capture FILE.py:FUNCTION`, not for stages")
    args.out = args.out or str(store.CAPTURES)
    if args.stages == ["cp"]:
        return cmd_capture_cp(args)
    shape = parse_shape(args.shape)
    if args.backward:
        from .measure.backward import capture
        chosen = select(backward=True) if args.stages == ["all"] else args.stages
        results = capture(chosen, shape, args.dtype, args.out)
    else:
        from .measure.capture import capture
        chosen = list(STAGES) if args.stages == ["all"] else args.stages
        results = capture(chosen, shape, args.dtype, args.out, args.record_unavailable)
    for r in results:
        if "error" in r:
            print(f"{r['stage']:>10}: FAILED {r['error']}")
            continue
        if "kept" in r:
            print(f"{r['record']:>10}: {r['kept']}")
            continue
        r = records.load_summary(r["record"], args.out)  # as written, its figures read off its trace
        if "unavailable" in r:
            print(f"{r['record']:>10}: not available here: {r['unavailable']}")
        elif args.backward:
            print(f"{r['record']:>10}: {r['ops_per_backward']} ops/backward ({r['ops_on_calling_thread_each'][0]} on "
                  f"the calling thread), {r['event_median_us']:.1f} us (event median), grad rel err "
                  + ", ".join(f"{k} {v:.1e}" for k, v in r["grad_rel_err"].items()))
        else:
            print(f"{r['record']:>10}: {r['ops_per_forward']} ops/forward, {r['event_median_us']:.1f} us "
                  f"(event median), rel err {r['rel_err']:.2e}")
    return 1 if any("error" in r for r in results) else 0


def cmd_capture_cp(args) -> int:
    """`capture cp`: ring attention over SDPA on --world-size GPUs, at each of --lengths."""
    from .measure import context_parallel as cp
    try:
        lengths = [int(x) for x in args.lengths.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1 or args.world_size < 2 or any(n % (2 * args.world_size) for n in lengths):
        raise ValueError(f"bad --lengths {args.lengths!r} or --world-size {args.world_size}: give lengths divisible "
                         f"by 2 x world size (the causal shard deals 2 x world chunks), world size 2 or more")
    rotations = tuple(args.rotate.split(","))
    if not set(rotations) <= {"allgather", "alltoall"}:
        raise ValueError(f"bad --rotate {args.rotate!r}: allgather, alltoall or both, comma-separated")
    configs = cp.configs_for(lengths, rotations[:1]) + [(max(lengths), r, True) for r in rotations[1:]]
    if args.unbalanced:
        configs.append((max(lengths), rotations[0], False))
    results = cp.capture(configs, args.world_size, args.out)
    for r in results:
        if "error" in r:
            print(f"{r['record']}: FAILED {r['error']}")
            continue
        r = records.load_summary(r["record"], args.out)
        ranks = r["ranks"]
        print(f"{r['record']}: {r['cp_event_median_us'] / 1000:.2f} ms on {r['world_size']} GPUs vs "
              f"{r['single_gpu']['event_median_us'] / 1000:.2f} ms on one (speedup {r['speedup']:.2f}x); rel err rows "
              + ", ".join(f"{x['rel_err_rows']:.1e}" for x in ranks) + "; hidden comm "
              + ", ".join(f"{x['overlap']['overlap_us']:.0f}/{x['overlap']['communication_us']:.0f} us" for x in ranks))
    return 1 if any("error" in r for r in results) or len(results) < len(configs) else 0


def cmd_show(args) -> int:
    from .analysis.compare import locate
    record = args.record
    if args.shape:  # `show flash --shape 1,16,8192,128` is `show flash-1x16x8192x128`
        record = names.record_name(get_stage(args.record).name, parse_shape(args.shape))
    if not record.endswith(".json") and records.kind_of(record) is records.STAGE:
        names.parse_record(record)  # a bad name is one line naming the forms a name takes
    record, folder = locate(record, args.captures)
    summary = records.load_summary(record, folder)
    if args.json or records.kind_of(record) not in (records.STAGE, records.OWN):  # backward, two-GPU: JSON
        print(json.dumps(summary, indent=1))
    else:
        print(show_text(summary))
    return 0


def cmd_diff(args) -> int:
    from .analysis import compare
    d = compare.diff(compare.load(args.a, args.captures), compare.load(args.b, args.captures))
    print(json.dumps(d, indent=1) if args.json else compare.text(d))
    return 0


def cmd_report(args) -> int:
    from .site import report
    size = report.write(args.record, args.out, args.against, args.captures)
    print(f"wrote {args.out} ({size / 1024:.0f} KiB): open it in a browser, no server needed")
    return 0


def cmd_check(args) -> int:
    """Every record the site reads, and every checked sentence, as the strict build evaluates them (the
    sentences need only the standard library, so this runs without the docs extra too)."""
    from .site import notebooks
    from .site.build import Build
    from .site.claims.core import false_statements
    build = Build(args.captures or store.CAPTURES, strict=True)
    problems = [*build.problems.values(), *notebooks.problems()]
    false = false_statements(build, store.ROOT / "docs")
    for why in [*problems, *false]:
        print(why)
    if not problems and not false:
        counts = ", ".join(f"{n} {kind}" for kind, n in records.site_record_count().items())
        print(f"all records the site uses are present and current ({counts}; {len(notebooks.stages())} notebooks), "
              f"and every checked sentence holds")
    return 1 if problems or false else 0


def cmd_notebooks(args) -> int:
    """`notebooks`: write the "Run it yourself" notebooks (and their pages) whose sources changed."""
    from .site import notebooks
    for path in notebooks.write_all():
        print(f"wrote {path.relative_to(store.ROOT)}")
    return 0


def cmd_conclusions(args) -> int:
    """`conclusions`: every conclusion the chapters state, from the records; with --against, what changed."""
    from .site import conclusions
    from .site.build import Build
    found = conclusions.conclusions(Build(args.captures, strict=True), store.ROOT / "docs")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n")
    if args.against:
        before = conclusions.load(args.against)
        changed, beyond = conclusions.difference(before, found), conclusions.beyond_numbers(before, found)
        print("\n".join(changed) if changed else "no conclusion changed")
        print(f"{len(changed)} of {len(found)} conclusions differ from {args.against}; {len(beyond)} beyond their "
              f"numbers{': ' if beyond else ''}{', '.join(beyond)}")
    elif not args.json:
        print("\n".join(f"{key}\n    {text}" for key, text in found.items()))
    return 0


def cmd_counters(args) -> int:
    needs_torch("counters")
    from .measure.counters import collect
    shape = parse_shape(args.shape)
    chosen = ([r.removesuffix(".counters") for r in records.COUNTERS.records()] if args.stages == ["all"]
             else [names.record_name(get_stage(n).name, shape) for n in args.stages])
    failed = False
    for r in collect(chosen, args.out):
        if "error" in r:
            failed = True
            print(f"{r['record']:>10}: FAILED {r['error']}")
        else:
            print(f"{r['capture']:>10}: {len(r['kernels'])} kernel(s) under {r['ncu']}")
    return 1 if failed else 0


def cmd_explain(args) -> int:
    from .analysis.kernel_names import explain
    if not args.name.strip():
        raise ValueError("give a kernel name, e.g. python -m attnprof explain 'flash_fwd_kernel'")
    info = explain(args.name)
    if args.json:
        print(json.dumps({k: info[k] for k in ("library", "math_unit", "dtype", "arch", "tile", "summary")}, indent=1))
    else:
        width = max(map(len, info))
        print("\n".join(f"{k:>{width}}: {v if v is not None else '(not in the name)'}" for k, v in info.items()))
    return 0


def cmd_which(args) -> int:
    dims, dropout = parse_shape(args.shape), probability(args.dropout)
    needs_torch("which")
    from .measure.verify import which
    r = which(dims, args.dtype, args.mask, dropout, args.layout, progress=True)
    if args.json:
        print(json.dumps(r, indent=1))
        return 0
    print(f"on {r['device']}: shape {r['shape']} {r['dtype']}, mask {r['mask']}, dropout {r['dropout']}, "
          f"layout {r['layout']}")
    print(f"backend that ran: {r['ran']}  (dispatcher's choice: {r['dispatcher_choice']}; "
          f"aten op: {r['aten_backend']})")
    if r["kernels"]:
        print(f"{r['device_ops']} device ops per forward, {us(r['device_us'])} of device time; kernels: "
              + ", ".join(short(n, 60) for n in r["kernels"]))
    if "median_us" in r:
        print(f"forward median {us(r['median_us'])}")
    rows = [(b, "yes" if e["eligible"] else "no", "; ".join(e["reasons"]) or "-") for b, e in r["eligibility"].items()]
    if rows:
        print(text_table(["backend", "eligible", "PyTorch's reasons"], rows))
    return 0


def cmd_verify(args) -> int:
    dtypes = tuple(args.dtypes.split(","))
    for name in dtypes:
        if name not in DTYPES:
            raise ValueError(f"unsupported dtype {name!r}: choose from {', '.join(DTYPES)}")
    needs_torch("verify")
    from .measure.verify import unexpected, verify
    rows = verify(dtypes=dtypes, progress=True)
    table = [(r["path"], r["dtype"], shape(r["shape"], "x"), "yes" if r["fully_masked_row"] else "",
              r["status"], f"{r['rel_frobenius']:.1e}" if "rel_frobenius" in r else "-",
              f"{r['max_abs']:.1e}" if "max_abs" in r else "-",
              textwrap.shorten(r.get("masked_row", r.get("reason", "")), 70, placeholder=" …"))
             for r in rows]
    print(text_table(["path", "dtype", "shape", "masked row", "status", "rel. Frobenius", "max abs", "note"], table))
    if args.out:
        from .measure.capture import environment
        store.write_json(args.out, "run-verify-cli", {"result": rows, **environment()})
    failures = [r for r in rows if unexpected(r)]
    if failures:
        print(f"{len(failures)} unexpected failure(s): " + ", ".join(
            f"{r['path']} {r['dtype']} {shape(r['shape'], 'x')}" + (" (masked row)" if r["fully_masked_row"] else "")
            for r in failures), file=sys.stderr)
    return 1 if failures else 0


def cmd_sweep(args) -> int:
    needs_torch("sweep")
    from .measure.runs import run
    chosen = list(names.RUNS) if args.only == "all" else args.only.split(",")
    status = run(chosen, args.out)
    for name, s in status.items():
        print(f"{name:>12}: {s}")
    return 0 if all(s == "ok" for s in status.values()) else 1


def cmd_regenerate(args) -> int:
    """`regenerate`: retake every stale record (or all) this machine can take, on all its GPUs."""
    from . import regenerate as regen
    began = time.monotonic()
    if not args.dry_run:  # what any machine writes, so that one command leaves nothing stale that this one can make
        cmd_notebooks(args)
    kinds = regen.parse_kinds(args.only)
    skip = regen.parse_skip(args.skip, kinds)
    wanted = regen.wanted_records(kinds, every=args.all, folder=args.out)
    if left := sorted(set(wanted) & skip):
        print(f"leaving out {', '.join(left)} (--skip)")
        wanted = [r for r in wanted if r not in skip]
    if not wanted:
        print("nothing to retake: every record the site uses of " + (", ".join(kinds) if kinds else "every kind")
              + (" but those left out" if left else "") + " is present and current")
        return 0
    machine = regen.detect()
    if args.dry_run:
        jobs, cannot = regen.plan(wanted, machine, args.out)
        for record, why in cannot.items():
            print(f"cannot retake {record} here: {why}; {records.kind_of(record).fix(record)}")
        print(regen.plan_text(jobs, machine.gpus) if jobs
              else f"nothing of the {len(wanted)} record(s) can be taken on this machine")
        return 0
    done = regen.regenerate(wanted, args.out, machine)
    print(regen.table(done.results, done.cannot))
    for why in done.left.values():
        print(why)
    print(regen.summary(done, machine, time.monotonic() - began))  # last: the one line to read
    return 1 if done.left else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnprof", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("capture", help="profile stages, or your own FILE.py:FUNCTION, on a CUDA GPU")
    c.add_argument("stages", nargs="+", metavar="STAGE",
                   help=f"one or more of: {', '.join(STAGES)}, or all; or cp (context parallelism); or "
                        f"FILE.py:FUNCTION, your own attention, called as FUNCTION(q, k, v)")
    c.add_argument("--shape", default=shape(DEFAULT_SHAPE, ","), help="B,H,S,D (default: %(default)s)")
    c.add_argument("--dtype", default=DEFAULT_DTYPE, help=f"one of {', '.join(DTYPES)} (default: %(default)s)")
    c.add_argument("--out", help=f"captures folder (default: docs/captures/<this GPU's set> for stages, {own.DEFAULT_OUT}/ for "
                                 f"FILE.py:FUNCTION)")
    c.add_argument("--mask", help="FILE.py:FUNCTION: also pass a boolean [S, S] mask, True where a query may see "
                                  "a key: causal, or none (None)")
    c.add_argument("--reference", help="FILE.py:FUNCTION: also compare with plain causal attention (causal)")
    c.add_argument("--record-unavailable", action="store_true",
                   help="where a stage cannot run here, replace its capture with a record of why "
                        "(by default an existing capture is kept)")
    c.add_argument("--backward", action="store_true", help="capture forward + backward (records STAGE-bwd)")
    c.add_argument("--world-size", type=int, default=names.CP_WORLD,
                   help="`capture cp`: GPUs, one process each (default: %(default)s)")
    c.add_argument("--lengths", default=",".join(map(str, names.CP_LENGTHS)),
                   help="`capture cp`: sequence lengths (default: %(default)s)")
    c.add_argument("--rotate", default="allgather,alltoall",
                   help="`capture cp`: how keys and values travel; the first at every length, others at the longest")
    c.add_argument("--unbalanced", action="store_true", help="`capture cp`: also one run without the causal shard")
    c.set_defaults(run=cmd_capture)

    s = sub.add_parser("show", help="print a capture, yours or the site's (no GPU needed)")
    s.add_argument("record", metavar="RECORD", help=f"a stage, a capture name such as {names.record_name('flash', LONG_SHAPE)}, flash-bwd or "
                   "my.attention, or the path of a capture's .json")
    s.add_argument("--shape", help="B,H,S,D of the capture, if not the default")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--captures", metavar="DIR", help=MINE)
    s.set_defaults(run=cmd_show)

    d = sub.add_parser("diff", help="compare two captures: op lists by kernel family, times, verdict, numerics")
    d.add_argument("a", metavar="A", help="a record (flash, window.flex, my.attention) or the path of a capture's .json")
    d.add_argument("b", metavar="B", help="the same, compared against A")
    d.add_argument("--json", action="store_true", help="print the comparison as JSON")
    d.add_argument("--captures", metavar="DIR", help=MINE)
    d.set_defaults(run=cmd_diff)

    o = sub.add_parser("report", help="one standalone HTML page of a capture, with the site's pieces")
    o.add_argument("record", metavar="RECORD", help="a record (flash, my.attention) or the path of a capture's .json")
    o.add_argument("--against", metavar="STAGE", help="also compare it with this capture (a record or a path)")
    o.add_argument("-o", "--out", default="report.html", help="the page to write (default: %(default)s)")
    o.add_argument("--captures", metavar="DIR", help=MINE)
    o.set_defaults(run=cmd_report)

    k = sub.add_parser("check", help="list captures that are missing or stale; exit 1 if any")
    k.add_argument("--captures", default=str(store.CAPTURES), help=argparse.SUPPRESS)
    k.set_defaults(run=cmd_check)

    b = sub.add_parser("notebooks", help="write the \"Run it yourself\" notebooks whose template, snippets or "
                                         "stage row changed (no GPU needed)")
    b.set_defaults(run=cmd_notebooks)

    c = sub.add_parser("conclusions", help="every conclusion the chapters state, from the records (no GPU needed)")
    c.add_argument("--json", metavar="FILE", help="write them to FILE, to compare a later regeneration with")
    c.add_argument("--against", metavar="FILE", help="print what changed since the conclusions written to FILE")
    c.add_argument("--captures", default=str(store.CAPTURES), help=argparse.SUPPRESS)
    c.set_defaults(run=cmd_conclusions)

    n = sub.add_parser("counters", help="on a CUDA GPU with Nsight Compute: hardware counters of one forward")
    n.add_argument("stages", nargs="+", metavar="STAGE", help="stages, or all (every counters record the site uses)")
    n.add_argument("--shape", default=",".join(map(str, DEFAULT_SHAPE)), help="B,H,S,D (default: %(default)s)")
    n.add_argument("--out", default=str(store.CAPTURES), help="captures folder (default: docs/captures/<this GPU's set>, or ATTNPROF_GPU's)")
    n.set_defaults(run=cmd_counters)

    e = sub.add_parser("explain", help="decode a kernel name: library, math unit, dtype, arch, tile")
    e.add_argument("name", metavar="KERNEL_NAME")
    e.add_argument("--json", action="store_true", help="print the decoding as JSON")
    e.set_defaults(run=cmd_explain)
    w = sub.add_parser("which", help="which SDPA backend really runs for these inputs, and why not the others")
    w.add_argument("--shape", default=shape(DEFAULT_SHAPE, ","), help="B,H,S,D (default: %(default)s)")
    w.add_argument("--dtype", default=DEFAULT_DTYPE, help=f"one of {', '.join(DTYPES)}")
    w.add_argument("--mask", default="causal", help="none, causal, bool or float (default: causal)")
    w.add_argument("--dropout", default="0", help="dropout probability, 0 to 1 (default: 0)")
    w.add_argument("--layout", default="contiguous", help="contiguous, transposed or strided")
    w.add_argument("--json", action="store_true")
    w.set_defaults(run=cmd_which)

    v = sub.add_parser("verify", help="every backend and provider vs a float64 reference")
    v.add_argument("--dtypes", default="bf16,fp16,fp32", help="comma-separated (default: %(default)s)")
    v.add_argument("--out", help="also write the rows as JSON into this folder")
    v.set_defaults(run=cmd_verify)

    r = sub.add_parser("sweep", help="on a CUDA GPU: sweeps, ceilings, serving shapes, verification runs")
    r.add_argument("--only", default="all", help="comma-separated run names, or all")
    r.add_argument("--out", default=str(store.CAPTURES), help="captures folder (default: docs/captures/<this GPU's set>, or ATTNPROF_GPU's)")
    r.set_defaults(run=cmd_sweep)

    g = sub.add_parser("regenerate", help="retake every stale record this machine can take, on all its GPUs")
    g.add_argument("--only", help="record kinds, comma-separated: " + ", ".join(k.name for k in records.KINDS))
    g.add_argument("--skip", help="records to leave out, comma-separated (run-sweep, say, to take it on its own)")
    which_ = g.add_mutually_exclusive_group()
    which_.add_argument("--stale", action="store_true", help="records missing, stale or inconsistent (the default)")
    which_.add_argument("--all", action="store_true", help="every record the site uses")
    g.add_argument("--dry-run", action="store_true", help="print the plan (which record on which GPU, what "
                   "cannot be taken here) and run nothing")
    g.add_argument("--out", default=str(store.CAPTURES), help="captures folder (default: docs/captures/<this GPU's set>, or ATTNPROF_GPU's)")
    g.set_defaults(run=cmd_regenerate)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "dtype", None) is not None and args.dtype not in DTYPES:
        print(f"error: unsupported dtype {args.dtype!r}: choose from {', '.join(DTYPES)}", file=sys.stderr)
        return 2
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, CaptureError) as e:  # a known failure is one line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
