"""The generated notebooks run, as a reader would run them, on a CPU."""
import pytest

from attnprof.analysis import kernel_names
from attnprof.analysis import records
from attnprof.site import notebooks
from attnprof.model.stages import ladder, STAGES
from attnprof.model.snippets import SNIPPETS, snippet_section
from attnprof.text import escape


@pytest.mark.parametrize("stage", ladder())
def test_notebook_runs_on_cpu(stage, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nb = notebooks.notebook(STAGES[stage])
    scope = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile(cell["source"], f"{stage}.ipynb", "exec"), scope)
    assert scope["rel_err"] < 1e-5
    assert (tmp_path / "trace.json").stat().st_size > 0
    shown = scope["view"]._repr_html_()  # the display cell: this profile beside the site's H200 capture
    assert "holds no GPU work" in shown  # a CPU runs no device ops
    h200 = records.load_summary(stage)
    assert "NVIDIA H200" in shown and shown.count('class="attnprof-trace"') == 1
    assert all(escape(kernel_names.label(op["name"])) in shown for op in h200["ops"] if op["kind"] == "kernel")


def test_notebooks_hold_the_snippet_not_a_copy():
    for stage in (STAGES[n] for n in ladder()):
        code = "\n".join(c["source"] for c in notebooks.notebook(stage)["cells"])
        assert snippet_section(SNIPPETS / f"{stage.snippet}.py", "attention") in code


def test_notebooks_are_byte_stable():
    """Generating twice gives the same bytes, so builds reuse mkdocs-jupyter's conversion cache."""
    for name in ladder():
        assert notebooks.file_text(STAGES[name]) == notebooks.file_text(STAGES[name])


def test_a_notebook_file_is_what_nbformat_writes():
    """The build writes the notebooks without nbformat: each file is a valid notebook, byte for byte what
    nbformat writes for it, and its cells are the stage's."""
    import nbformat
    for name in ladder():
        text = notebooks.file_text(STAGES[name])
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
        assert nbformat.writes(nb) == text
        assert [(c.cell_type, c.source) for c in nb.cells] == notebooks.cells(STAGES[name])


def test_template_cells_fit_the_stage():
    sdpa = "\n".join(source for _, source in notebooks.cells(STAGES["flash"]))
    plain = "\n".join(source for _, source in notebooks.cells(STAGES["naive"]))
    assert "backend = 'flash'" in sdpa and "causal_mask(S, device)" not in sdpa
    assert "causal_mask(S, device)" in plain and "backend =" not in plain
    assert "--8<--" not in sdpa + plain and "$" not in sdpa + plain  # every include and placeholder filled


def test_slim_css_keeps_what_can_match_and_drops_the_rest():
    css = ('@charset "UTF-8";.jp-Cell{color:red}.bp3-button{color:blue}.jp-Cell .bp3-x,.jp-Cell p{margin:0}'
           '@media (max-width:600px){.jp-Cell{padding:0}.bp3-y{padding:1px}}@keyframes spin{from{a:b}to{a:c}}'
           'pre{white-space:pre}.a[data-x="}"]{color:green}')
    slim = notebooks.slim_css(css, {"jp-Cell", "a"})
    assert slim.startswith('@charset "UTF-8";') and ".jp-Cell{color:red}" in slim and "bp3-button" not in slim
    assert ".jp-Cell .bp3-x,.jp-Cell p{margin:0}" in slim  # one selector of the list can match: kept whole
    assert "@media (max-width:600px){.jp-Cell{padding:0}}" in slim and "@keyframes spin{from{a:b}to{a:c}}" in slim
    assert "pre{white-space:pre}" in slim and '.a[data-x="}"]{color:green}' in slim  # a brace inside quotes


def test_a_build_imports_the_notebook_converter_only_to_convert():
    """MkDocs loads mkdocs-jupyter after the extension deferred nbconvert and jupytext: loading the config
    imports neither, nor nbformat (a build whose notebooks are in the conversion cache never does); a
    deferred module, once used, is the module itself."""
    import subprocess
    import sys
    from attnprof.model.snippets import ROOT
    code = ("import sys; from mkdocs.config import load_config; load_config('mkdocs.yml'); "
            "import mkdocs_jupyter.plugin as p; from attnprof.site.deferred import Deferred; "
            "print(isinstance(p.convert, Deferred), sorted(m for m in sys.modules if m.split('.')[0] in "
            "('nbconvert', 'jupytext', 'nbformat') and not isinstance(sys.modules[m], Deferred)), "
            "p.convert.nb2html is sys.modules['mkdocs_jupyter.convert'].nb2html, 'nbconvert' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "[]", "True", "True"], r.stdout


def _copy(tree):
    """The parts of the project that `check` reads, copied into `tree`."""
    import shutil
    from attnprof.model.snippets import ROOT
    for part in ("attnprof", "snippets", "kernel-repos", "docs"):  # kernel-repos: FlashAttention-4's files key its records
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def _check(tree):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "attnprof", "check"], cwd=tree, capture_output=True, text=True,
                       timeout=300)
    return r.returncode, r.stdout.strip().splitlines(), r.stderr


@pytest.mark.parametrize("edit, changed, stages", [
    ("attnprof/site/notebook.py.tmpl", "attnprof/site/notebook.py.tmpl", ladder()),
    ("snippets/naive.py", "snippets/naive.py:attention", ["naive"]),
])
def test_an_edit_of_the_template_or_a_snippet_makes_check_name_the_notebook_stale(tmp_path, edit, changed, stages):
    """A comment added inside what a notebook shows (the template, the snippet's attention section) keeps every
    record current (their keys hash tokens, not comments) and stales exactly the notebooks that show it: `check`
    names each in one line, with what changed and the fix; the fix makes check pass again."""
    tree = _copy(tmp_path)
    path = tree / edit
    text = path.read_text()
    if edit.endswith(".tmpl"):
        path.write_text(text.replace("# %%\nimport torch\n", "# %%\nimport torch  # a comment a reader sees\n", 1))
    else:
        path.write_text(text.replace("def attention(", "# a comment a reader sees\ndef attention(", 1))
    assert path.read_text() != text
    code, lines, err = _check(tree)
    assert code == 1, (lines, err)
    assert lines == [f"notebook file docs/notebooks/{s}.ipynb is stale ({changed} changed since it was written): "
                     f"run `python -m attnprof notebooks` and commit docs/notebooks/" for s in stages]
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "attnprof", "notebooks"], cwd=tree, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and f"wrote docs/notebooks/{stages[0]}.ipynb" in r.stdout, r.stdout + r.stderr
    assert _check(tree)[0] == 0
    assert "a comment a reader sees" in (tree / "docs" / "notebooks" / f"{stages[0]}.ipynb").read_text()


def test_the_committed_notebooks_are_current_and_a_hand_edit_is_named():
    """Every committed notebook and page is what its sources make; a notebook edited by hand (no source
    changed) is named stale too, with the fix."""
    assert notebooks.problems() == []
    stage = STAGES["flash"]
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        for path, text in notebooks.files(stage, out).items():
            path.write_text(text.replace("relative error vs float64", "rel. error"))
        assert notebooks.problem(stage, out) == (
            f"notebook file {out / 'flash.ipynb'} is stale (it differs from what its template, snippets and stage "
            f"row make): run `python -m attnprof notebooks` and commit docs/notebooks/")
