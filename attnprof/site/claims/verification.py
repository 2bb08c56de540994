"""Claims of the chapter on numerical verification: every path against a float64 reference."""
from __future__ import annotations

from ...text import escape
from ..build import Build
from ..words import listed, short
from .core import ADAPTS, Flip, Statement, claim
from .edits import in_first_process

WROTE = {"NaN": "NaN", "zeros": "zeros", "other": "other values"}  # what a fully masked row held, in the lesson


def _fail_one(result):
    """A bf16 check of a row with keys to attend made a failure."""
    next(r for r in result if r["dtype"] == "bf16" and not r["fully_masked_row"] and r["status"] == "pass")["status"] = "fail"


def _masked_zeros(path: str):
    def edit(result):
        for r in result:
            if r["path"] == path and r.get("masked_row"):
                r["masked_row"], r["status"] = "zeros", "pass"
    return in_first_process("verify", edit)


@claim("verify-answers", reads=["run-verify"],
       flip=[Flip("run-verify.json", in_first_process("verify", _fail_one)),
             Flip("run-verify.json", _masked_zeros("naive"), ADAPTS)])
def verify_answers(build: Build) -> Statement:
    """The guess answered: every bf16 check of rows with keys passes; what each path wrote on a fully masked row."""
    checks = build.run("verify")
    bf16 = [r for r in checks if r["dtype"] == "bf16" and not r["fully_masked_row"] and r["status"] in ("pass", "fail")]
    failed = sorted({r["path"] for r in bf16 if r["status"] == "fail"})
    wrote = {}
    for r in checks:
        if r["fully_masked_row"] and r.get("masked_row"):
            wrote.setdefault(WROTE.get(r["masked_row"], "other values"), set()).add(escape(short(r["path"])))
    said = ", ".join(f"{held} from {listed(sorted(paths))}" for held, paths in sorted(wrote.items(), key=lambda x: len(x[1])))
    text = (f"{sum(r['status'] == 'pass' for r in bf16)} of {len(bf16)} bf16 checks "
            f"of rows with keys pass ({len({r['path'] for r in bf16})} paths, tolerance "
            f"{bf16[0]['tolerance']:.0e}); on a fully masked row, {said} (every dtype checked)")
    lesson = f"Every path agrees with float64 in bf16 wherever a row sees keys; where it sees none, {said}"
    return Statement(text, bool(bf16) and not failed, f"failed {failed}, wrote {wrote}", said, lesson)
