"""The command line on the committed captures, and its one-line answers to bad input."""
import json
import shutil
import subprocess
import sys

import pytest

from attnprof import store
from attnprof.cli import main
from attnprof.stages import LADDER, ROOT

REQUIRED = {"stage", "device", "shape", "dtype", "ops_per_forward", "ops", "forward_device_us",
            "event_median_us", "rel_err"}


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "attnprof", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("stage", LADDER)
def test_show_json_has_the_documented_keys(stage, capsys):
    assert main(["show", stage, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert REQUIRED <= set(s)
    assert s["stage"] == stage and s["device"] == "NVIDIA H200" and s["shape"] == [8, 16, 1024, 64]
    assert isinstance(s["ops_per_forward"], int) and s["ops_per_forward"] == len(s["ops"])
    assert all(op["kind"] in ("kernel", "memcpy", "memset") and op["duration_us"] > 0 for op in s["ops"])
    assert s["ops_per_forward_each"] == [s["ops_per_forward"]] * 3
    assert 1e-3 < s["rel_err"] < 1e-2  # bf16


def test_show_text_prints_op_list_and_table(capsys):
    assert main(["show", "naive"]) == 0
    out = capsys.readouterr().out
    assert "Memcpy DtoD" in out and "key_averages" in out and "Self CUDA" in out


def test_check_passes_on_the_committed_captures():
    r = cli("check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_reports_missing_and_stale(tmp_path):
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    (folder / "flash.json").unlink()
    stale = json.loads((folder / "naive.json").read_text())
    stale["key"] = "0" * 16  # as if snippets/naive.py had changed since the capture
    (folder / "naive.json").write_text(json.dumps(stale))
    problems = store.stale_records(folder)
    assert set(problems) == {"flash", "naive"}
    assert "missing" in problems["flash"] and "stale" in problems["naive"]
    assert all("python -m attnprof capture" in why for why in problems.values())
    assert main(["check", "--captures", str(folder)]) == 1


def test_capture_without_cuda_says_so_and_touches_nothing(tmp_path):
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    r = cli("capture", "naive", "--out", str(folder))
    assert r.returncode != 0
    lines = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert lines == ["error: no CUDA GPU on this machine: capture needs one "
                     "(the site builds from the committed captures without it)"]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


@pytest.mark.parametrize("args, message", [
    (["show", "nope"], "unknown stage 'nope'"),
    (["capture", "naive", "--shape", "8,16,x,64"], "bad shape"),
    (["capture", "naive", "--dtype", "int8"], "unsupported dtype 'int8'"),
])
def test_bad_input_is_one_line(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_corrupt_capture_is_one_line(tmp_path, capsys):
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    (folder / "math.json").write_text('{"stage": "math", "ops": [')
    assert main(["show", "math", "--captures", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert "corrupt" in err and "python -m attnprof capture math" in err and "\n" not in err


def test_writes_are_atomic(tmp_path, monkeypatch):
    """A write that fails half way leaves the old capture whole and no temporary file behind."""
    import os
    store.write_json(tmp_path, "naive", {"record": "naive", "v": 1})
    def broken_replace(src, dst):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        store.write_json(tmp_path, "naive", {"record": "naive", "v": 2})
    assert json.loads((tmp_path / "naive.json").read_text())["v"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["naive.json"]


def test_show_an_unavailable_provider_is_its_reason(capsys):
    assert main(["show", "hub"]) == 0
    out = capsys.readouterr().out
    assert "not available on this machine: Hugging Face kernels hub" in out


def test_a_stage_that_runs_out_of_memory_leaves_the_others(monkeypatch, tmp_path, capsys):
    """Without a GPU here, the capture of each stage is replaced: one runs out of memory, one works."""
    import torch
    from attnprof.measure import capture
    monkeypatch.setattr(capture, "require_cuda", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)

    def fake(name, shape, dtype_name, out_dir):
        if name == "naive":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB\nmore detail")
        return {"stage": name, "record": name}
    monkeypatch.setattr(capture, "capture_stage", fake)
    results = capture.capture(["naive", "inplace"], (8, 16, 1024, 64), "bf16", tmp_path)
    assert results[1] == {"stage": "inplace", "record": "inplace"}
    assert "out of GPU memory" in results[0]["error"] and "--shape" in results[0]["error"]
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("capture of naive failed, its old capture is untouched")
