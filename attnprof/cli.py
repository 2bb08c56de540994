"""python -m attnprof {capture,show,check,explain}: capture attention profiles on a GPU, read them anywhere."""
from __future__ import annotations

import argparse
import json
import sys

from . import render, store
from .capture import CaptureError
from .stages import DEFAULT_SHAPE, DTYPES, STAGES, get_stage, parse_shape


def cmd_capture(args) -> int:
    from .capture import capture
    names = list(STAGES) if args.stages == ["all"] else args.stages
    for name in names:
        get_stage(name)
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
    record = args.stage
    if args.shape:  # `show flash --shape 1,16,8192,128` is `show flash-1x16x8192x128`
        record = store.record_name(get_stage(args.stage).name, parse_shape(args.shape))
    store.parse_record(record)
    summary = store.load_summary(record, args.captures)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(render.show_text(summary))
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnprof", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("capture", help="profile stages on a CUDA GPU and write their captures")
    c.add_argument("stages", nargs="+", metavar="STAGE", help=f"one or more of: {', '.join(STAGES)}, or all")
    c.add_argument("--shape", default=",".join(map(str, DEFAULT_SHAPE)), help="B,H,S,D (default: %(default)s)")
    c.add_argument("--dtype", default=store.DEFAULT_DTYPE, help=f"one of {', '.join(DTYPES)} (default: %(default)s)")
    c.add_argument("--out", default=str(store.CAPTURES), help="captures folder (default: docs/captures)")
    c.set_defaults(run=cmd_capture)

    s = sub.add_parser("show", help="print a committed capture (no GPU needed)")
    s.add_argument("stage", metavar="STAGE", help="a stage, or a capture name such as flash-1x16x8192x128")
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
