"""A reader's own attention: `capture FILE.py:FUNCTION` up to the GPU (and its bad input), `diff`, `report`
and `attnprof.display` on the committed captures, names escaped, and a report page in a real browser."""
import base64
import gzip
import json
import shutil

import pytest

import attnprof
from attnprof.analysis import compare, timing, trace
from attnprof.model import own, store
from attnprof.analysis import records
from attnprof.model.procedure import LABEL
from attnprof.cli import main
from attnprof.measure import own as capture_own
from attnprof.site import report
from attnprof.text import escape
from test_browser import STUB, browser, serve, stub  # noqa: F401  (fixtures: headless Chromium, a Perfetto stub)

EVIL = "<script>alert('x')</script> & \"q\""


# ---- capture: the checks before the GPU, and every bad input -----------------------------------------

def write(tmp_path, body, name="mine.py"):
    path = tmp_path / name
    path.write_text("import torch\nimport torch.nn.functional as F\n\n" + body)
    return path


def run_capture(capsys, target, *extra, out):
    code = main(["capture", str(target), "--shape", "1,2,64,16", "--dtype", "fp32", "--out", str(out), *extra])
    err = capsys.readouterr().err
    return code, err


GOOD = "def attention(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"


@pytest.mark.parametrize("body, target, expected", [
    (None, "missing.py:attention", "no file 'missing.py'"),
    (GOOD, "mine.py:other", "has no function 'other' (it defines attention)"),
    ("def attention(q, k):\n    return q\n", "mine.py:attention", "cannot be called as function(q, k, v)"),
    ("x = 1 +\n", "mine.py:attention", "cannot import"),
    (GOOD, "mine.py", "bad target"),
    (GOOD, "mine.py:attention", "no CUDA GPU on this machine"),
])
def test_bad_input_before_the_gpu_is_one_line_exit_2_and_nothing_written(tmp_path, monkeypatch, capsys, body,
                                                                         target, expected):
    monkeypatch.chdir(tmp_path)
    if body is not None:
        write(tmp_path, body)
    out = tmp_path / "out"
    code, err = run_capture(capsys, target, out=out)
    assert code == 2 and err.count("\n") == 1 and expected in err, err
    assert not out.exists()


def test_the_mask_option_changes_the_call_it_checks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, GOOD)
    code, err = run_capture(capsys, "mine.py:attention", "--mask", "causal", out=tmp_path / "out")
    assert code == 2 and "cannot be called as function(q, k, v, mask)" in err
    code, err = run_capture(capsys, "mine.py:attention", "--mask", "diagonal", out=tmp_path / "out")
    assert code == 2 and "bad --mask 'diagonal'" in err


@pytest.mark.parametrize("body, expected", [
    ("def attention(q, k, v):\n    raise RuntimeError('my kernel is broken')\n",
     "attention(q, k, v) raised RuntimeError: my kernel is broken"),
    ("def attention(q, k, v):\n    return q[..., :8]\n", "returned shape 1,2,64,8, not q's shape 1,2,64,16"),
    ("def attention(q, k, v):\n    return q.half()\n", "returned torch.float16, not the inputs' torch.float32"),
    ("def attention(q, k, v):\n    return (q, k)\n", "returned a tuple, not a tensor"),
])
def test_a_function_that_fails_on_its_inputs_is_one_line_and_nothing_written(tmp_path, monkeypatch, capsys,
                                                                             body, expected):
    """Past the GPU check (here the inputs go to the CPU instead): the first call is checked."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(capture_own, "DEVICE", "cpu")
    write(tmp_path, body)
    out = tmp_path / "out"
    code, err = run_capture(capsys, "mine.py:attention", out=out)
    assert code == 2 and err.count("\n") == 1 and expected in err, err
    assert not out.exists()


def test_prepare_imports_the_file_by_path_and_keeps_the_function(tmp_path):
    path = write(tmp_path, GOOD)
    got, function, fn = capture_own.prepare(f"{path}:attention")
    assert got == path and function == "attention" and fn.__name__ == "attention"


def test_a_readers_capture_is_keyed_by_its_files_tokens(tmp_path):
    path = write(tmp_path, GOOD)
    settings = own.settings((8, 16, 1024, 64), "bf16", "attention", None, None)
    before = own.file_key(path, settings)
    path.write_text(path.read_text().replace("\n\n", "\n\n# a comment\n\n\n"))
    assert own.file_key(path, settings) == before  # comments and spacing: the same code
    path.write_text(path.read_text().replace("is_causal=True", "is_causal=False"))
    assert own.file_key(path, settings) != before
    assert own.file_key(path, {**settings, "mask": "causal"}) != own.file_key(path, settings)
    assert own.record_name("a/my-attn.v2.py", "f") == "my_attn_v2.f"  # safe in a page, and one dot
    assert own.record_name("w.py", "f", (1, 2, 64, 16), "fp32") == "w.f-1x2x64x16-fp32"


def test_the_sites_own_captures_are_current_and_held_by_check():
    assert records.problems(kinds=[records.OWN]) == {}
    assert set(own.site_records()) == {"window.naive", "window.sdpa", "window.flex",
                                       "layer.eager", "layer.sdpa", "layer.flex_attention"}
    for record in own.site_records():
        s = records.load_summary(record)
        file = f"snippets/{record.split('.')[0]}.py"
        assert s["source_hash"] == own.source_hash(file) and s["file"] == file
        assert s["device"] == "NVIDIA H200" and s["ops_per_forward"] == len(s["ops"]) > 0


def test_check_names_a_stale_readers_capture(tmp_path):
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    s = json.loads((folder / "window.flex.json").read_text())
    s["key"] = "0" * 16  # as if snippets/window.py had changed since the capture
    (folder / "window.flex.json").write_text(json.dumps(s))
    problems = records.problems(folder)
    assert list(problems) == ["window.flex"]
    assert "stale" in problems["window.flex"]
    assert f"python -m attnprof capture snippets/window.py:flex --out docs/captures/{store.GPU}" in problems["window.flex"]


# ---- diff ---------------------------------------------------------------------------------------------

def test_align_marks_same_changed_removed_and_added():
    op = lambda name, kind="kernel": {"name": name, "kind": kind, "duration_us": 1.0}
    a = {"ops": [op("Memset (Device)", "memset"), op("softmax_warp_forward"), op("nvjet_sm90_tst_a")]}
    b = {"ops": [op("Memset (Device)", "memset"), op("nvjet_sm90_tst_b"), op("triton_tem_fused_flex_attention_0")]}
    rows = compare.align(a, b)
    assert [(r["status"], r["a_index"], r["b_index"]) for r in rows] == [
        ("same", 1, 1), ("removed", 2, None), ("changed", 3, 2), ("added", None, 3)]


def test_diff_of_two_stages_reads_at_100_columns(capsys):
    assert main(["diff", "flash", "window.flex"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100
    for text in ("device time / forward (profiler)", "CPU time / forward", "a stream of calls", "TFLOP/s", "rel. error",
                 "Op lists aligned by kernel family", "pytorch_flash", "triton_tem_fused"):
        assert text in out, text


def test_diff_json_by_path_of_a_readers_capture(tmp_path, capsys):
    for name in ("window.naive.json", "window.naive.trace.json.gz"):
        shutil.copy(store.CAPTURES / name, tmp_path / name)
    assert main(["diff", "naive", str(tmp_path / "window.naive.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    a, b = records.load_summary("naive"), records.load_summary("window.naive")
    assert d["a"]["device_us"] == a["forward_device_us"] and d["b"]["cpu_us"] == b["cpu_forward_us"]
    assert d["ratios"]["device_us"] == pytest.approx(b["forward_device_us"] / a["forward_device_us"])
    assert sum(d["counts"].values()) == len(d["ops"]) >= max(a["ops_per_forward"], b["ops_per_forward"])
    assert d["b"]["stream"] == timing.record_verdict(b).stream  # from its unprofiled samples


@pytest.mark.parametrize("args, expected", [
    (["diff", "flash", "nothing"], "no capture 'nothing'"),
    (["diff", "flash", "missing/x.json"], "no capture 'missing/x.json'"),
    (["report", "nothing", "-o", "x.html"], "no capture 'nothing'"),
])
def test_diff_and_report_answer_a_bad_name_in_one_line(tmp_path, monkeypatch, capsys, args, expected):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err
    assert not (tmp_path / "x.html").exists()


# ---- a reader's captures found by name, where `capture` wrote them ---------------------------------------

def as_readers(folder, record, name):
    """The committed reader's capture `record` as a reader's own capture `name` in `folder` (its summary
    renamed, its trace as it is): what `capture` writes into attnprof-captures/."""
    folder.mkdir(exist_ok=True)
    s = records.load_summary(record)
    s.update(record=name, stage=name, title=f"My {s['title']}")
    store.write_json(folder, name, s)
    shutil.copy(store.trace_path(store.CAPTURES, record), store.trace_path(folder, name))


def test_show_diff_report_and_display_find_a_readers_capture_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / own.DEFAULT_OUT  # where `capture my.py:FUNCTION` writes, in the current folder
    as_readers(mine, "window.flex", "my.flex")
    as_readers(mine, "window.naive", "my.naive")
    assert main(["show", "my.flex"]) == 0
    assert capsys.readouterr().out.startswith("my.flex on NVIDIA H200")
    assert main(["show", f"{own.DEFAULT_OUT}/my.naive.json", "--json"]) == 0  # by path too
    assert json.loads(capsys.readouterr().out)["record"] == "my.naive"
    assert main(["diff", "my.naive", "my.flex", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["a"]["record"], d["b"]["record"]) == ("my.naive", "my.flex")
    assert main(["diff", "my.flex", "flex"]) == 0  # one of the reader's against one of the site's
    assert "B  flex: " in capsys.readouterr().out
    assert main(["report", "my.flex", "--against", "window.flex", "-o", "page.html"]) == 0
    page = (tmp_path / "page.html").read_text()
    assert "My Sliding window" in page and "Op lists aligned by kernel family" in page
    html = attnprof.display("my.flex", against="my.naive")._repr_html_()
    assert html.count('class="attnprof-trace"') == 2 and "triton_tem_fused_flex_attention_0" in html

    # elsewhere, with --captures DIR (and captures= in a notebook)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    assert main(["show", "my.flex"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no capture 'my.flex'" in err and own.DEFAULT_OUT in err
    assert main(["show", "my.flex", "--captures", str(mine)]) == 0
    assert main(["diff", "my.flex", "my.naive", "--captures", str(mine)]) == 0
    assert main(["report", "my.naive", "--captures", str(mine), "-o", "p.html"]) == 0 and (other / "p.html").is_file()
    assert "<svg" in attnprof.display("my.naive", captures=mine)._repr_html_()


def test_a_name_in_both_folders_is_one_line_naming_both_files(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / own.DEFAULT_OUT
    mine.mkdir()
    for name in ("window.flex.json", "window.flex.trace.json.gz"):  # a reader's window.flex beside the site's
        shutil.copy(store.CAPTURES / name, mine / name)
    for args in (["show", "window.flex"], ["diff", "flex", "window.flex"], ["report", "window.flex", "-o", "x.html"]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "two captures are named 'window.flex'" in err, err
        assert f"{own.DEFAULT_OUT}/window.flex.json and {store.CAPTURES / 'window.flex.json'}" in err
    assert not (tmp_path / "x.html").exists()
    with pytest.raises(ValueError, match="two captures are named"):
        attnprof.display("window.flex")
    assert main(["show", str(store.CAPTURES / "window.flex.json")]) == 0  # a path says which


# ---- a stream verdict where the CUDA graph failed ---------------------------------------------------------

GRAPH_ERROR = "AcceleratorError: CUDA error: operation not permitted when stream is capturing"


def without_graph(folder, name, back_to_back, enqueue, keep_timing=True):
    """The committed window.naive as a reader's capture whose forward could not be recorded into a CUDA graph
    (it built a tensor from a Python list on each call): its timing kept back to back and CPU enqueue, each
    given here as a multiple of its profiled device time, and the graph's error instead of graph_us."""
    as_readers(folder, "window.naive", name)
    s = records.load_summary(name, folder)
    device = s["forward_device_us"]
    if keep_timing:
        s["timing"] = {"back_to_back_us": [back_to_back * device * (1 + i / 1000) for i in range(30)],
                       "enqueue_us": [enqueue * device * (1 + i / 1000) for i in range(30)],
                       "graph_error": GRAPH_ERROR}
    else:
        del s["timing"]
    store.write_json(folder, name, s)
    return s


def test_a_stream_verdict_rests_on_the_profilers_device_time_when_the_graph_fails(tmp_path):
    late = without_graph(tmp_path, "my.late", back_to_back=1.55, enqueue=1.5)  # the CPU sets the pace
    busy = without_graph(tmp_path, "my.busy", back_to_back=1.02, enqueue=0.4)  # the GPU does
    none = without_graph(tmp_path, "my.none", 1, 1, keep_timing=False)
    assert timing.record_verdict(late) is None  # no graph replay: the rule's own GPU only is missing
    st = timing.record_stream(late)
    assert (st.verdict, st.basis, st.label) == ("launch-bound", timing.ESTIMATE, "launch-bound (estimate)")
    assert st.gpu_only.median == pytest.approx(late["forward_device_us"])  # the median of the profiled forwards
    assert "profiler's device time" in st.note and GRAPH_ERROR in st.note and "\n" not in st.note
    assert timing.record_stream(busy).verdict == "GPU-bound"
    assert (timing.record_stream(none).verdict, timing.record_stream(none).note) == (
        None, "not measured: the capture kept no unprofiled timing samples")
    graphed = timing.record_stream(records.load_summary("window.naive"))
    assert graphed.basis == timing.GRAPH and graphed.note is None
    assert graphed.verdict == timing.record_verdict(records.load_summary("window.naive")).stream


def test_diff_and_report_say_the_estimate_or_the_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / own.DEFAULT_OUT
    without_graph(mine, "my.late", back_to_back=1.55, enqueue=1.5)
    without_graph(mine, "my.none", 1, 1, keep_timing=False)
    assert main(["diff", "window.naive", "my.late"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("a stream of calls"))
    # the CPU's enqueue 1.5 times the GPU's time: launch-bound, by less than the margin that decides it
    assert row.split()[-4:] == ["launch-bound", "(estimate)", "(within", "2×)"], row
    said = " ".join(out.split())  # the note, wrapped at 100 columns
    assert "A stream of calls of B: launch-bound by an estimate" in said and "could not be recorded" in said
    assert "launch-bound on this host by less than the 2× margin that decides it" in said
    assert GRAPH_ERROR in said and "A stream of calls of A" not in said  # window.naive's graph replayed: nothing to add
    assert max(map(len, out.splitlines())) <= 100
    assert main(["diff", "my.none", "my.late", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["a"]["stream"], d["a"]["stream_note"]) == (None, "not measured: the capture kept no unprofiled timing samples")
    assert (d["b"]["stream"], d["b"]["stream_gpu_only"]) == ("launch-bound", "profiler device time")
    assert main(["report", "my.late", "-o", "late.html"]) == 0  # without --against: the gaps line says it
    page = (tmp_path / "late.html").read_text()
    assert "launch-bound by an estimate" in page and "operation not permitted when stream is capturing" in page
    assert main(["report", "my.none", "--against", "my.late", "-o", "none.html"]) == 0
    page = (tmp_path / "none.html").read_text()
    assert page.count("not measured: the capture kept no unprofiled timing samples") == 2  # gaps line, and the diff
    assert "A stream of calls of A: launch-bound by an estimate" in page  # --against is the diff's A


# ---- what the chapter says, checked -------------------------------------------------------------------

def test_only_the_block_mask_saves_device_time():  # own-attention.md, "What the comparison teaches"
    t = lambda r: records.load_summary(r)["forward_device_us"]
    assert t("window.flex") < t("flex")
    assert t("window.sdpa") > t("auto")
    assert t("window.naive") > 0.9 * t("naive")
    d = compare.diff(records.load_summary("naive"), records.load_summary("window.naive"))
    assert d["counts"]["same"] == records.load_summary("naive")["ops_per_forward"]  # the same op list
    sdpa = records.load_summary("window.sdpa")
    from attnprof.analysis.oplist import launching_path
    assert any("aten::where" in launching_path(sdpa, op) for op in sdpa["ops"])  # the mask converted per call


# ---- report and display -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def evil(tmp_path_factory):
    """A reader's capture whose title and a kernel name hold < > & and quotes (from the committed window.flex)."""
    folder = tmp_path_factory.mktemp("evil")
    s = records.load_summary("window.flex")
    events = trace.load(store.trace_path(store.CAPTURES, "window.flex"))
    kernels = {ev["name"] for ev in events["traceEvents"] if ev.get("cat") == "kernel"}
    for ev in events["traceEvents"]:  # the kernels, and any CPU op named like one (Triton's launcher)
        if ev.get("ph") == "X" and ev.get("name") in kernels:
            ev["name"] = f"{ev['name']}<b>&\"'<i>"
    s.update(trace.summarize(trace.forwards(events, LABEL)), record="evil.attention", stage="evil.attention", title=EVIL)
    s["key_averages"] = [dict(r, name=r["name"] + "<b>&\"'<i>" if r["name"] in kernels else r["name"])
                         for r in s["key_averages"]]
    store.write_capture(folder, s, events)
    return folder / "evil.attention.json"


def test_report_page_is_standalone_small_and_escaped(tmp_path, evil):
    page = tmp_path / "page.html"
    assert main(["report", str(evil), "--against", "flex", "-o", str(page)]) == 0
    text = page.read_text()
    assert len(text.encode()) <= 300 * 1024
    assert "<script>alert" not in text and "<b>&" not in text and "<i>" not in text
    assert "&lt;script&gt;alert" in text and "&lt;b&gt;&amp;" in text
    assert 'href="captures/' not in text and '.md"' not in text and ":material-" not in text
    assert text.count('class="md-button attnprof-perfetto"') == 1 and "data:application/gzip;base64," in text
    assert "prefers-color-scheme: dark" in text and "postMessage" in text  # both schemes, perfetto.js inlined
    for piece in ("Captured on NVIDIA H200", "The op list", "Gaps", "The kernels, decoded", "key_averages",
                  "Op lists aligned by kernel family", 'class="attnprof-trace"'):
        assert piece in text, piece


def test_display_renders_the_pieces_inline():
    html = attnprof.display("window.flex")._repr_html_()
    assert 'class="attnprof-report"' in html and "<svg" in html and "triton_tem_fused_flex_attention_0" in html
    side = attnprof.display("window.sdpa", against="auto")._repr_html_()
    assert side.count('class="attnprof-trace"') == 2 and "Op lists aligned by kernel family" in side


def test_display_of_a_raw_profile_from_the_notebooks_loop(tmp_path):
    """What a notebook's profile_forward writes on a GPU, here the committed trace of flash unpacked."""
    raw = tmp_path / "trace.json"
    raw.write_bytes(gzip.decompress((store.CAPTURES / "flash.trace.json.gz").read_bytes()))
    html = attnprof.display(str(raw), against="flash", shape=(8, 16, 1024, 64), rel_err=1e-3)._repr_html_()
    assert "Your profile on NVIDIA H200" in html and "1 the same (=)" in html


@pytest.mark.parametrize("missing", ["markdown", "pymdownx"])
def test_display_without_the_markdown_stack_shows_reports_one_line(missing):
    """With Python-Markdown or pymdown-extensions missing, `report` prints one line and exits 2, and
    `attnprof.display` shows that same line in the notebook (its HTML and its text) instead of raising."""
    import subprocess
    import sys
    code = (f"import sys; sys.modules[{missing!r}] = None\n"  # as if it were not installed
            "import attnprof\n"
            "from attnprof.cli import main\n"
            "view = attnprof.display('flash')\n"
            "print(repr(view)); print(view._repr_html_())\n"
            "sys.exit(main(['report', 'flash', '-o', 'never.html']))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=store.ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    line = r.stderr.strip()
    assert line.count("\n") == 0 and line.startswith("error: a report renders through Python-Markdown")
    assert f", and {missing}" in line and "is not installed here: pip install -e '.[measure]'" in line
    shown, html_ = r.stdout.strip().split("\n")
    assert shown == line and html_ == f"<p>{escape(line)}</p>"
    assert not (store.ROOT / "never.html").exists()


# ---- a report page in a real browser ------------------------------------------------------------------

@pytest.mark.browser
def test_report_page_in_a_browser(tmp_path, browser, stub, perfetto_received):  # noqa: F811
    report.write("window.sdpa", tmp_path / "page.html", against="auto")
    httpd, url = serve(tmp_path)
    try:
        browser.set_window_size(1400, 1000)
        browser.get(f"{url}/page.html")
        found = browser.execute_script("""
            const main = document.querySelector('main.attnprof-report').getBoundingClientRect();
            const over = [];
            for (const el of document.querySelectorAll('main table, main .attnprof-trace, main p, main h2')) {
              const r = el.getBoundingClientRect();
              if (r.right > main.right + 1) over.push(el.tagName + ' ' + Math.round(r.right - main.right));
            }
            return {over, scroll: document.documentElement.scrollWidth, width: window.innerWidth,
                    bars: document.querySelectorAll('.attnprof-trace svg title').length,
                    kernels: document.querySelectorAll('code[title]').length,
                    perfetto: document.querySelectorAll('a.attnprof-perfetto').length};""")
        assert found["over"] == [] and found["scroll"] <= found["width"], found
        assert found["bars"] >= records.load_summary("window.sdpa")["ops_per_forward"] and found["kernels"] > 0, found
        assert found["perfetto"] == 1
        received = perfetto_received(browser, stub)
        committed = (store.CAPTURES / "window.sdpa.trace.json.gz").read_bytes()
        assert gzip.decompress(base64.b64decode(received["base64"])) == gzip.decompress(committed)
        assert "SDPA with a boolean mask" in received["title"]
    finally:
        httpd.shutdown()


def test_a_capture_on_the_cpu_says_what_its_trace_holds(tmp_path, monkeypatch, capsys):
    """Past the GPU check (on the CPU here), `capture FILE.py:FUNCTION` writes its pair and says what its record
    holds, read off its trace as the pages read it: ops per forward, the one-call median, the error."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(capture_own, "DEVICE", "cpu")
    monkeypatch.setattr(capture_own, "environment", lambda: {"device": "cpu", "capability": "cpu",
                                                             "date": "2026-12-07 10:00 UTC"})
    write(tmp_path, GOOD)
    out = tmp_path / "out"
    code = main(["capture", "mine.py:attention", "--shape", "1,2,64,16", "--dtype", "fp32", "--out", str(out)])
    said = capsys.readouterr().out
    assert code == 0 and sorted(p.name for p in out.iterdir()) == ["mine.attention-1x2x64x16-fp32.json",
                                                                   "mine.attention-1x2x64x16-fp32.trace.json.gz"]
    record = records.load_summary("mine.attention-1x2x64x16-fp32", out)
    assert said.startswith(f"mine.attention-1x2x64x16-fp32: {record['ops_per_forward']} ops/forward, "
                           f"{record['event_median_us']:.1f} us (event median)"), said


def test_a_readers_flexattention_building_its_block_mask_each_call_is_shown_diffed_and_reported(tmp_path, capsys):
    """A reader's compiled FlexAttention with a score_mod (tanh soft-capping), its block mask built in every call
    (tests/fixtures/softcap_flex.py, captured on an H100): the ops its forward launched are those its capture
    counted, the block mask's kernels and copies before the attention kernel, the same in every profiled forward;
    `show`, `diff` and `report` read the record (issue 53: `check` once refused it, counting another way)."""
    from attnprof.model.snippets import ROOT
    fixtures = ROOT / "tests" / "fixtures"
    for suffix in (".json", ".trace.json.gz"):
        shutil.copy(fixtures / f"h100-softcap_flex.attention{suffix}", tmp_path / f"softcap_flex.attention{suffix}")
    record = str(tmp_path / "softcap_flex.attention.json")
    assert main(["show", record, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ops_per_forward_each"] == [shown["ops_per_forward"]] * 3 and shown["ops_per_forward"] > 40
    assert shown["ops"][-1]["name"] == "triton_tem_fused_flex_attention_0" and shown["device"] == "NVIDIA H100 80GB HBM3"
    assert main(["diff", "flash", record, "--json"]) == 0
    diffed = json.loads(capsys.readouterr().out)
    assert diffed["b"]["ops_per_forward"] == shown["ops_per_forward"]
    assert diffed["ops"][-1]["b_name"] == "triton_tem_fused_flex_attention_0"
    assert main(["report", record, "--against", "flash", "-o", str(tmp_path / "page.html")]) == 0
    assert "triton_tem_fused_flex_attention_0" in (tmp_path / "page.html").read_text()
