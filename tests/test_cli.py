"""The command line on the committed captures, and its one-line answers to bad input."""
import gzip
import json
import re
import shutil
import subprocess
import sys

import pytest

from attnprof.model import store, snippets
from attnprof.analysis import records
from attnprof.cli import main
from attnprof.model.stages import ladder
from attnprof.model.snippets import ROOT

REQUIRED = {"stage", "device", "shape", "dtype", "ops_per_forward", "ops", "forward_device_us",
            "event_median_us", "rel_err"}


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "attnprof", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("stage", ladder())
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
    problems = records.problems(folder, kinds=[records.STAGE])
    assert set(problems) == {"flash", "naive"}
    assert "missing" in problems["flash"] and "stale" in problems["naive"]
    assert all("python -m attnprof capture" in why for why in problems.values())
    assert main(["check", "--captures", str(folder)]) == 1


@pytest.mark.parametrize("command", [["capture", "naive"], ["sweep", "--only", "ceilings"]])
def test_without_cuda_a_gpu_command_names_itself_and_touches_nothing(tmp_path, command, capsys):
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert main([*command, "--out", str(folder)]) != 0
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: no CUDA GPU on this machine: `python -m attnprof {command[0]}` needs one; the committed captures "
        "stay as they are, and the site builds from them"]
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


def test_corrupt_capture_is_one_line(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "captures"  # a reader's folder, looked in first: its math is the one shown
    folder.mkdir()
    (folder / "math.json").write_text('{"stage": "math", "ops": [')
    monkeypatch.setattr(store, "CAPTURES", tmp_path / "site")  # math is nowhere else
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
    assert "did not run when captured: Hugging Face kernels hub" in out


def test_a_stage_that_runs_out_of_memory_leaves_the_others(monkeypatch, tmp_path, capsys):
    """Without a GPU here, the capture of each stage is replaced: one runs out of memory, one works."""
    import torch
    from attnprof.measure import capture
    monkeypatch.setattr(capture, "require_cuda", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)

    def fake(name, shape, dtype_name, out_dir, **options):
        if name == "naive":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB\nmore detail")
        return {"stage": name, "record": name}
    monkeypatch.setattr(capture, "capture_stage", fake)
    results = capture.capture(["naive", "inplace"], (8, 16, 1024, 64), "bf16", tmp_path)
    assert results[1] == {"stage": "inplace", "record": "inplace"}
    assert "out of GPU memory" in results[0]["error"] and "--shape" in results[0]["error"]
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("capture of naive failed, its old capture is untouched")


# ---- a record holds what was measured: the figures a page shows are read off its trace ---------------

def test_a_kernel_lengthened_in_the_trace_moves_every_figure_of_its_forward(tmp_path):
    """flash's one kernel 100 µs longer in each profiled forward of its trace: `show` gives a forward 100 µs
    longer, its op list and the device time per forward together (nothing stored beside the trace to disagree)."""
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    before = json.loads(cli("show", str(folder / "flash.json"), "--json").stdout)
    path = store.trace_path(folder, "flash")
    t = json.loads(gzip.decompress(path.read_bytes()))
    for e in t["traceEvents"]:
        if e.get("cat") == "kernel" and "flash_fwd" in e["name"]:
            e["dur"] += 100
    path.write_bytes(gzip.compress(json.dumps(t).encode()))
    after = json.loads(cli("show", str(folder / "flash.json"), "--json").stdout)
    assert after["forward_device_us"] == pytest.approx(before["forward_device_us"] + 100)
    assert after["ops"][0]["duration_us"] == pytest.approx(before["ops"][0]["duration_us"] + 100)
    assert records.problems(folder) == {}  # a reading is not a forgery to refuse (the sentences it makes false are named)


# ---- bad input gets one line -----------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["which", "--shape", "1,1,8,8", "--dtype", "fp32", "--dropout", "2"], "bad dropout '2'"),
    (["which", "--shape", "1,1,8,8", "--dtype", "fp32", "--dropout", "-1"], "bad dropout '-1'"),
    (["which", "--shape", "1,1,8,8", "--dtype", "fp32", "--dropout", "nan"], "bad dropout 'nan'"),
    (["explain", ""], "give a kernel name"),
    (["explain", "  "], "give a kernel name"),
    (["verify", "--dtypes", "fp32,int4"], "unsupported dtype 'int4'"),
])
def test_more_bad_input_is_one_line(args, message):
    r = cli(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [f"error: {r.stderr.strip()[len('error: '):]}"]
    assert message in r.stderr


def test_which_shows_progress_and_no_profiler_chatter(capfd):
    assert main(["which", "--shape", "1,2,64,32", "--dtype", "fp32"]) == 0
    out, err = capfd.readouterr()  # the file descriptors: the profiler writes from C++
    assert "backend that ran: flash" in out
    assert "3/3" in err and "[#" in err  # the progress bar, on stderr
    for chatter in ("USDT", "profiler_start", "profiler_stop", "Profiler clears events"):
        assert chatter not in err + out


def test_verify_shows_progress(capsys, monkeypatch):
    from attnprof.measure import verify
    every = verify.candidates
    two = lambda device: dict(list(every(device).items())[:2])  # naive and math: the bar, not the kernels
    monkeypatch.setattr(verify, "candidates", two)
    verify.verify(dtypes=("fp32",), cases=[((1, 2, 32, 16), False)], progress=True)
    err = capsys.readouterr().err
    assert "2/2" in err and "naive fp32 1x2x32x16" in err


def _row(path, status, masked=False, **extra):
    return {"path": path, "dtype": "bf16", "shape": [2, 4, 256, 64], "fully_masked_row": masked,
            "status": status, "rel_frobenius": 1e-3, "max_abs": 1e-2, **extra}


LONG_REASON = ("SageAttention 1.0.6: ModuleNotFoundError: No module named 'sageattention' "
               "(pip install sageattention==1.0.6 on a CUDA GPU)")


@pytest.mark.parametrize("rows, status", [
    ([_row("naive", "pass"), _row("naive", "fail", True, masked_row="NaN")], 0),  # the chapter explains it
    ([_row("cudnn", "pass"), _row("cudnn", "fail", True, masked_row="other")], 0),  # explained too
    ([_row("math", "pass"), _row("flex", "fail", True, masked_row="other")], 1),  # a masked row nobody explains
    ([_row("math", "fail")], 1),
    ([_row("sage", "unavailable", reason=LONG_REASON)], 0),
])
def test_verify_exit_status_means_unexpected_failures(monkeypatch, capsys, rows, status):
    from attnprof.measure import verify
    monkeypatch.setattr(verify, "verify", lambda **kwargs: rows)
    assert main(["verify"]) == status
    out, err = capsys.readouterr()
    assert ("unexpected failure" in err) == bool(status)
    if status:
        assert len(err.strip().splitlines()) == 1 and rows[-1]["path"] in err
    for line in out.splitlines()[2:]:  # the note column ends at a word, never inside one
        note = line.split("  ")[-1].strip()
        if note and note not in ("NaN", "other"):
            words = note.rstrip(" …").split()
            assert all(w in LONG_REASON.split() for w in words), note


# ---- torch is needed only to run attention ---------------------------------------------------------

WITHOUT_TORCH = "import sys; sys.modules['torch'] = None; from attnprof.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("command", [["capture", "naive"], ["which"], ["verify"], ["sweep"], ["counters", "naive"]])
def test_without_torch_a_command_that_needs_it_says_what_to_install(command):
    r = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *command], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: `python -m attnprof {command[0]}` runs attention and needs PyTorch, which is not installed here: "
        "pip install -e '.[measure]'"]


def test_without_torch_the_reading_commands_work():
    for command in (["check"], ["show", "flash"], ["explain", "flash_fwd_kernel"]):
        r = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *command], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, (command, r.stderr)


WITHOUT = "import sys\nfor m in sys.argv.pop(1).split(','): sys.modules[m] = None\n" + WITHOUT_TORCH.split("; ", 1)[1]
DOCS_STACK = "mkdocs,material,mkdocs_jupyter,nbformat,pygments,zensical"  # the docs extra beyond the measure extra's


def test_report_needs_only_the_measure_extra(tmp_path):
    """On a GPU machine with `pip install -e '.[measure]'`: the report renders without the documentation
    stack, and where what it does import is missing, it says in one line what to install."""
    import tomllib
    measure = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["measure"]
    assert any(d.startswith("markdown") for d in measure) and any(d.startswith("pymdown-extensions") for d in measure)
    page = tmp_path / "page.html"
    r = subprocess.run([sys.executable, "-c", WITHOUT, DOCS_STACK, "report", "window.flex", "-o", str(page)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and page.is_file() and "<svg" in page.read_text(), r.stderr[-2000:]
    for missing in ("pymdownx", "markdown"):
        r = subprocess.run([sys.executable, "-c", WITHOUT, f"{DOCS_STACK},{missing}", "report", "window.flex", "-o",
                            str(tmp_path / "x.html")], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [
            f"error: a report renders through Python-Markdown and pymdown-extensions, and {missing}"
            f"{'.details' if missing == 'pymdownx' else ''} is not installed here: pip install -e '.[measure]'"], r.stderr
        assert not (tmp_path / "x.html").exists()


def test_torch_is_an_extra_and_the_serve_command_leaves_it_out():
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("torch") for d in project["dependencies"])
    extras = project["optional-dependencies"]
    assert any(d.startswith("torch") for d in extras["measure"])
    assert "attnprof[docs,measure]" in extras["test"]  # the tests run the snippets
    readme = (ROOT / "README.md").read_text()
    serve = next(l for l in readme.splitlines() if l.rstrip().endswith("mkdocs serve"))
    assert "torch" not in serve and '".[docs]"' in serve


def test_the_test_command_waits_for_the_dpkg_lock():
    readme = (ROOT / "README.md").read_text()
    test_command = next(l for l in readme.splitlines() if l.rstrip().endswith("&& pytest"))
    assert test_command.count("apt-get -o DPkg::Lock::Timeout=600 ") == 2
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == test_command.strip()


# ---- a comment is not a code change ----------------------------------------------------------------

def test_comments_and_blank_lines_do_not_change_a_snippets_hash(tmp_path, monkeypatch):
    folder = tmp_path / "snippets"
    shutil.copytree(snippets.SNIPPETS, folder)
    monkeypatch.setattr(snippets, "SNIPPETS", folder)
    assert records.status("naive") is None
    source = (folder / "naive.py").read_text()
    edited = source.replace("def attention(", "# a note for the reader\n\n\ndef attention(", 1)
    edited = edited.replace("\n", "  \n").replace("(-2, -1)", "( -2,-1 )")  # trailing blanks, other spacing
    (folder / "naive.py").write_text(edited)
    assert records.status("naive") is None
    (folder / "naive.py").write_text(source.replace("def attention(", "SCALE = 1.0\n\n\ndef attention(", 1))
    assert "stale" in records.status("naive")


def test_the_pages_code_prints_nothing_into_the_test_output():
    """Code blocks that print (a backend name, a relative error) or profile keep it to themselves
    unless they fail."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",  # no workers of its own
                        "docs/fallback.md", "docs/naive.md", "docs/reading-a-profile.md"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    for noise in ("flash flash flash", "relative error", "USDT", "profiler_start"):
        assert noise not in r.stdout + r.stderr


def test_check_evaluates_the_sentences_without_any_extra():
    """`check` needs neither PyTorch nor the documentation stack, not even Python-Markdown: the checked
    sentences are plain Python over the records."""
    r = subprocess.run([sys.executable, "-c", WITHOUT, f"{DOCS_STACK},markdown,pymdownx", "check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("and every checked sentence holds"), r.stderr[-1000:]


def test_conclusions_are_listed_and_a_changed_one_is_named(tmp_path, capsys):
    saved = tmp_path / "conclusions.json"
    assert main(["conclusions", "--json", str(saved)]) == 0
    found = json.loads(saved.read_text())
    assert any(key.endswith("say cudnn-fastest") for key in found) and all(found.values())
    assert not any(text.startswith("(cannot be said") for text in found.values())  # the committed records say all
    key = next(k for k in found if k.endswith("say cudnn-fastest"))
    saved.write_text(json.dumps({**found, key: "an older wording"}))
    capsys.readouterr()
    assert main(["conclusions", "--against", str(saved)]) == 0
    out = capsys.readouterr().out
    assert f"~ {key}\n    was: an older wording\n    now: {found[key]}" in out
    assert f"1 of {len(found)} conclusions differ from {saved}; 1 beyond their numbers: {key}" in out
    # other figures alone are counted apart from other words: a regeneration moves numbers, not conclusions
    other = next(k for k, text in found.items() if re.search(r"\d", text) and k != key)
    saved.write_text(json.dumps({**found, other: re.sub(r"\d", "7", found[other])}))
    capsys.readouterr()
    assert main(["conclusions", "--against", str(saved)]) == 0
    assert f"1 of {len(found)} conclusions differ from {saved}; 0 beyond their numbers\n" in capsys.readouterr().out
    assert main(["conclusions", "--against", str(tmp_path / "missing.json")]) == 2


def test_the_readme_is_a_newcomers_page():
    """At most 200 lines, the two set-up commands (serve; run the tests) within its first 40, its one
    picture present and small, and every file it links present."""
    import re
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= 200, len(lines)
    first = lines[:40]
    assert any(l.rstrip().endswith("mkdocs serve") for l in first)
    assert any(l.rstrip().endswith("&& pytest") for l in first)
    links = re.findall(r"\]\(((?!https?:)[^)#]+)", readme)
    pictures = [l for l in links if l.endswith(".png")]
    assert len(pictures) == 1 and (ROOT / pictures[0]).stat().st_size < 150 * 1024
    assert [l for l in links if not (ROOT / l).exists()] == []
