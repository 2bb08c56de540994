"""python -m attnprof {capture,show,check,explain,which,verify,sweep}: capture attention profiles on a
GPU, read them anywhere. Bad input is answered in one line."""
from __future__ import annotations

import argparse
import json
import sys

from . import store
from .oplist import KIND_LABEL
from .stages import DEFAULT_SHAPE, DTYPES, STAGES, get_stage, parse_shape
from .store import CaptureError
from .text import shape, short, us



def text_table(headers, rows) -> str:
    """Columns padded to their widest cell, for the terminal."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*map(str, r)) for r in rows])


def show_text(summary) -> str:
    """A capture as `show` prints it: the per-forward op list and the key_averages table."""
    head = f"{summary['stage']} on {summary['device']} ({summary['capability']}), shape {summary['shape']}, {summary['dtype']}"
    if "unavailable" in summary:
        return f"{head}\nnot available on this machine: {summary['unavailable']}"
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
        text_table(["Name", "Calls", "Self CPU", "CPU total", "Self CUDA", "CUDA total"], averages),
    ])


def cmd_capture(args) -> int:
    from .measure.capture import capture
    names = list(STAGES) if args.stages == ["all"] else args.stages
    shape = parse_shape(args.shape)
    results = capture(names, shape, args.dtype, args.out)
    for r in results:
        if "error" in r:
            print(f"{r['stage']:>10}: FAILED {r['error']}")
        elif "unavailable" in r:
            print(f"{r['record']:>10}: not available here: {r['unavailable']}")
        else:
            print(f"{r['record']:>10}: {r['ops_per_forward']} ops/forward, {r['event_median_us']:.1f} us "
                  f"(event median), rel err {r['rel_err']:.2e}")
    return 1 if any("error" in r for r in results) else 0


def cmd_show(args) -> int:
    record = args.record
    if args.shape:  # `show flash --shape 1,16,8192,128` is `show flash-1x16x8192x128`
        record = store.record_name(get_stage(args.record).name, parse_shape(args.shape))
    store.parse_record(record)
    summary = store.load_summary(record, args.captures)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(show_text(summary))
    return 0


def cmd_check(args) -> int:
    problems = store.stale_records(args.captures)
    for why in problems.values():
        print(why)
    if not problems:
        print(f"all {len(store.site_records())} captures the site uses are present and current")
    return 1 if problems else 0


def cmd_explain(args) -> int:
    from .names import explain
    info = explain(args.name)
    if args.json:
        print(json.dumps({k: info[k] for k in ("library", "math_unit", "dtype", "arch", "tile", "summary")}, indent=1))
    else:
        width = max(map(len, info))
        print("\n".join(f"{k:>{width}}: {v if v is not None else '(not in the name)'}" for k, v in info.items()))
    return 0


def cmd_which(args) -> int:
    from .measure.verify import which
    r = which(parse_shape(args.shape), args.dtype, args.mask, args.dropout, args.layout)
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
    from .measure.verify import verify
    rows = verify(dtypes=tuple(args.dtypes.split(",")))
    table = [(r["path"], r["dtype"], shape(r["shape"], "x"), "yes" if r["fully_masked_row"] else "",
              r["status"], f"{r['rel_frobenius']:.1e}" if "rel_frobenius" in r else "-",
              f"{r['max_abs']:.1e}" if "max_abs" in r else "-", r.get("masked_row", r.get("reason", ""))[:70])
             for r in rows]
    print(text_table(["path", "dtype", "shape", "masked row", "status", "rel. Frobenius", "max abs", "note"], table))
    if args.out:
        from .measure.capture import environment
        store.write_json(args.out, "run-verify-cli", {"result": rows, **environment()})
    return 1 if any(r["status"] == "fail" and not r["fully_masked_row"] for r in rows) else 0


def cmd_sweep(args) -> int:
    from .measure.runs import RUNS, run
    names = list(RUNS) if args.only == "all" else args.only.split(",")
    status = run(names, args.out)
    for name, s in status.items():
        print(f"{name:>12}: {s}")
    return 0 if all(s == "ok" for s in status.values()) else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnprof", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("capture", help="profile stages on a CUDA GPU and write their captures")
    c.add_argument("stages", nargs="+", metavar="STAGE", help=f"one or more of: {', '.join(STAGES)}, or all")
    c.add_argument("--shape", default=shape(DEFAULT_SHAPE, ","), help="B,H,S,D (default: %(default)s)")
    c.add_argument("--dtype", default=store.DEFAULT_DTYPE, help=f"one of {', '.join(DTYPES)} (default: %(default)s)")
    c.add_argument("--out", default=str(store.CAPTURES), help="captures folder (default: docs/captures)")
    c.set_defaults(run=cmd_capture)

    s = sub.add_parser("show", help="print a committed capture (no GPU needed)")
    s.add_argument("record", metavar="STAGE", help="a stage, or a capture name such as flash-1x16x8192x128")
    s.add_argument("--shape", help="B,H,S,D of the capture, if not the default")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--captures", default=str(store.CAPTURES), help=argparse.SUPPRESS)
    s.set_defaults(run=cmd_show)

    k = sub.add_parser("check", help="list captures that are missing or stale; exit 1 if any")
    k.add_argument("--captures", default=str(store.CAPTURES), help=argparse.SUPPRESS)
    k.set_defaults(run=cmd_check)

    e = sub.add_parser("explain", help="decode a kernel name: library, math unit, dtype, arch, tile")
    e.add_argument("name", metavar="KERNEL_NAME")
    e.add_argument("--json", action="store_true", help="print the decoding as JSON")
    e.set_defaults(run=cmd_explain)
    w = sub.add_parser("which", help="which SDPA backend really runs for these inputs, and why not the others")
    w.add_argument("--shape", default=shape(DEFAULT_SHAPE, ","), help="B,H,S,D (default: %(default)s)")
    w.add_argument("--dtype", default=store.DEFAULT_DTYPE, help=f"one of {', '.join(DTYPES)}")
    w.add_argument("--mask", default="causal", help="none, causal, bool or float (default: causal)")
    w.add_argument("--dropout", type=float, default=0.0, help="dropout probability (default: 0)")
    w.add_argument("--layout", default="contiguous", help="contiguous, transposed or strided")
    w.add_argument("--json", action="store_true")
    w.set_defaults(run=cmd_which)

    v = sub.add_parser("verify", help="every backend and provider vs a float64 reference")
    v.add_argument("--dtypes", default="bf16,fp16,fp32", help="comma-separated (default: %(default)s)")
    v.add_argument("--out", help="also write the rows as JSON into this folder")
    v.set_defaults(run=cmd_verify)

    r = sub.add_parser("sweep", help="on a CUDA GPU: sweeps, ceilings, serving shapes, verification runs")
    r.add_argument("--only", default="all", help="comma-separated run names, or all")
    r.add_argument("--out", default=str(store.CAPTURES), help="captures folder (default: docs/captures)")
    r.set_defaults(run=cmd_sweep)
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
