"""Nothing is lost: a stage that cannot run here keeps its capture, and a capture's two files are
written as a pair. Captures are taken on the CPU here (a GPU is only needed for real ones)."""
import json
import os
import shutil

import pytest
import torch

from attnprof.model import stages, store
from attnprof.analysis import records
from attnprof.analysis import trace
from attnprof.cli import main
from attnprof.measure import capture, profiling
from attnprof.model.stages import ProviderUnavailable

SMALL = (1, 2, 64, 32)


@pytest.fixture
def on_cpu(monkeypatch):
    """capture() as on a GPU machine, but on this CPU: inputs on the CPU, a fixed environment stamp."""
    monkeypatch.setattr(capture, "require_cuda", lambda command="capture": None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(capture, "make_inputs", lambda shape, dtype, device: [
        torch.randn(shape, dtype=torch.float32) for _ in range(3)])
    monkeypatch.setattr(capture, "environment", lambda stage=None: {
        "device": "cpu", "capability": "cpu", "date": "2026-12-01 10:00 UTC",
        **({"source_hash": stage.source_hash()} if stage else {})})


@pytest.fixture
def folder(tmp_path):
    """A copy of the committed captures."""
    shutil.copytree(store.CAPTURES, tmp_path / "captures")
    return tmp_path / "captures"


def files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def not_installed(monkeypatch):
    def prepare(self, q, k, v):
        raise ProviderUnavailable("SageAttention 1.0.6: ModuleNotFoundError: No module named 'sageattention'")
    monkeypatch.setattr(stages.Stage, "prepare", prepare)


def test_a_provider_that_cannot_load_keeps_the_existing_capture(on_cpu, folder, monkeypatch, capsys):
    not_installed(monkeypatch)
    before = files(folder)
    assert main(["capture", "sage", "--out", str(folder)]) == 0
    date = records.load_summary("sage", folder)["date"].split()[0]
    assert capsys.readouterr().out.strip() == f"sage: kept the capture of {date}: SageAttention 1.0.6 is not installed here"
    assert files(folder) == before


def test_a_backward_that_cannot_load_keeps_the_existing_capture(folder, monkeypatch):
    """On a machine without its provider, `capture --backward` leaves the committed pair byte-identical."""
    from attnprof.measure import backward
    not_installed(monkeypatch)
    before = files(folder)
    result = backward.capture_backward("fa4", stages.DEFAULT_SHAPE, "bf16", folder, device="cpu")
    assert result["kept"].startswith("kept the capture of ") and "unavailable" not in result
    assert files(folder) == before


def test_context_parallelism_without_a_second_gpu_keeps_the_committed_records(folder, capsys):
    before = files(folder)
    assert main(["capture", "cp", "--out", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs 2 CUDA GPUs" in err and "kept" in err
    assert files(folder) == before


def test_a_backend_that_cannot_run_keeps_the_existing_capture(on_cpu, folder, monkeypatch):
    def prepare(self, q, k, v):
        def forward():
            raise RuntimeError("No available kernel. Aborting execution.")
        return forward
    monkeypatch.setattr(stages.Stage, "prepare", prepare)
    before = files(folder)
    [result] = capture.capture(["naive"], stages.DEFAULT_SHAPE, "bf16", folder)
    date = records.load_summary("naive", folder)["date"].split()[0]
    assert result["kept"] == f"kept the capture of {date}: No available kernel. Aborting execution."
    assert files(folder) == before


def test_unavailable_is_recorded_where_no_capture_exists_or_when_asked(on_cpu, folder, tmp_path, monkeypatch, capsys):
    not_installed(monkeypatch)
    empty = tmp_path / "empty"
    [result] = capture.capture(["sage"], stages.DEFAULT_SHAPE, "bf16", empty)
    assert "No module named 'sageattention'" in json.loads((empty / "sage.json").read_text())["unavailable"]
    assert [p.name for p in empty.iterdir()] == ["sage.json"]

    assert main(["capture", "sage", "--out", str(folder), "--record-unavailable"]) == 0
    assert "not available here" in capsys.readouterr().out
    assert "unavailable" in json.loads((folder / "sage.json").read_text())
    assert not store.trace_path(folder, "sage").exists()


def test_a_cpu_capture_is_a_pair_of_what_it_measured_and_its_trace(on_cpu, tmp_path, capfd):
    out = tmp_path / "cpu"
    [summary] = capture.capture(["naive"], SMALL, "bf16", out)
    assert sorted(p.name for p in out.iterdir()) == ["naive-1x2x64x32.json", "naive-1x2x64x32.trace.json.gz"]
    written = records.load_summary("naive-1x2x64x32", out)
    assert written["ops_per_forward_each"] == [0, 0, 0] and written["cpu_ops"]  # no device here, CPU ops only
    assert set(json.loads(store.summary_path(out, "naive-1x2x64x32").read_text())).isdisjoint(
        ("ops", "cpu_ops", "forward_device_us", "event_median_us"))  # what was measured; the rest is read off it
    err = capfd.readouterr().err
    assert "USDT" not in err and "profiler_st" not in err and "Profiler clears events" not in err


def test_a_stage_failing_while_writing_leaves_the_old_pair(on_cpu, tmp_path, monkeypatch, capsys):
    """The trace is in place and the summary's rename fails: the old trace comes back, no temp file stays."""
    out = tmp_path / "cpu"
    capture.capture(["naive"], SMALL, "bf16", out)
    before = files(out)
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if str(dst).endswith(".json"):
            raise OSError("disk full (simulated)")
        real_replace(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    [result] = capture.capture(["naive"], SMALL, "bf16", out)
    assert "disk full" in result["error"]
    assert [p.name for p in calls] == ["naive-1x2x64x32.trace.json.gz", "naive-1x2x64x32.json",
                                       "naive-1x2x64x32.trace.json.gz"]  # the new trace went in, the old came back
    assert files(out) == before
    assert "its old capture is untouched" in capsys.readouterr().out


def test_write_capture_without_an_old_pair_leaves_nothing_half_written(tmp_path, monkeypatch):
    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith(".json"):
            raise OSError("disk full (simulated)")
        real_replace(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError):
        store.write_capture(tmp_path, {"record": "naive"}, {"traceEvents": []})
    assert list(tmp_path.iterdir()) == []


def test_profiling_keeps_the_profilers_chatter_and_passes_on_the_rest(tmp_path, capfd):
    import warnings

    def forward():
        os.write(2, b"USDT:2026-11-30 07:15:07 9380:9380 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a warning from the kernel itself\n")
        warnings.warn("Warning: Profiler clears events at the end of each cycle.")
        return torch.ones(2) * 2
    with torch.no_grad():
        profiling.profile_quietly(forward, tmp_path / "trace.json")
    err = capfd.readouterr().err
    assert err.count("a warning from the kernel itself") >= 1
    assert "USDT" not in err and "profiler_start" not in err and "clears events" not in err
    assert trace.load(tmp_path / "trace.json")["traceEvents"]
