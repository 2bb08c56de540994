"""A new stage is its snippet and one entry in the stage table: everything else derives from the table."""
import json
import shutil

import markdown

from attnprof.model import names, stages, store, snippets
from attnprof.analysis import records
from attnprof.cli import main
from attnprof.site.build import Build
from attnprof.model.stages import STAGES, Stage

SNIPPET = '''import torch.nn.functional as F


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
'''


def test_a_new_stage_is_one_snippet_and_one_table_entry(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "snippets"
    shutil.copytree(snippets.SNIPPETS, folder)
    (folder / "mine.py").write_text(SNIPPET)
    monkeypatch.setattr(snippets, "SNIPPETS", folder)
    monkeypatch.setitem(STAGES, "mine", Stage("mine", "My attention", "mine", group="provider", fused=True,
                                              sweep=True, shapes=("post",)))
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)

    # check: the site now expects its capture, says so in one line with the command that takes it
    assert main(["check", "--captures", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "no capture 'mine'" in out and "python -m attnprof capture mine" in out
    assert "mine" in stages.select(sweep=True) and "mine" in stages.providers()

    # the sweep's path list is the table's
    from attnprof.measure import sweep
    measured = []
    from attnprof.measure import repeat
    monkeypatch.setattr(sweep, "prepared", lambda path, shape, **kw: (measured.append(path) or {"path": path}, None))
    monkeypatch.setattr(sweep, "timed_together", lambda ready, calls, seed=None, **kw: [row for row, _ in ready])
    repeat.measured(sweep.sweep, None, (128,), (32,), 128, 2)
    assert "mine" in measured and sorted(measured) == sorted(stages.select(sweep=True))

    # a capture of it (flash's files under its name, keyed for it): check asks only for the runs that now
    # measure it too (their stage list and code changed), and show and a page render it
    summary = json.loads((folder / "flash.json").read_text())
    summary.update(record="mine", stage="mine", title="My attention",
                   key=records.STAGE.key("mine"))
    store.write_json(folder, "mine", summary)
    shutil.copy(folder / "flash.trace.json.gz", folder / "mine.trace.json.gz")
    problems = records.problems(folder)
    assert set(problems) == {"run-sweep", "run-fastest"}, problems
    assert all("stale" in why and "snippets/mine.py" in why for why in problems.values())
    assert main(["show", "mine", "--captures", str(folder)]) == 0
    assert "mine on NVIDIA H200" in capsys.readouterr().out
    page = markdown.markdown("<!-- attnprof: ops mine -->\n\n<!-- attnprof: trace mine -->",
                             extensions=["tables", "attr_list", "attnprof.site.extension"],
                             extension_configs={"attnprof.site.extension": {"build": Build(folder)}})
    assert "flash_fwd" in page and "<svg" in page and "capture not usable" not in page.lower()


def test_no_provider_is_named_outside_the_stage_table_and_the_kernel_names():
    from pathlib import Path
    for provider in stages.providers():
        quoted = {f'"{provider}"', f"'{provider}'"}
        modules = {p.relative_to(snippets.ROOT).as_posix() for p in Path(snippets.ROOT, "attnprof").rglob("*.py")
                   if any(q in p.read_text() for q in quoted)}
        assert modules <= {"attnprof/model/stages.py", "attnprof/analysis/kernel_names.py", "attnprof/site/pieces/runs.py"}, (provider, modules)
        assert len(modules) <= 2, (provider, modules)


def _typed(text: str) -> tuple[set, str]:
    """What a module types, outside its comments and docstrings: its tuples of integers, and the text of its
    string constants (f-strings' literal parts included), joined."""
    import ast
    tree = ast.parse(text)
    docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    tuples = {tuple(e.value for e in n.elts) for n in ast.walk(tree) if isinstance(n, (ast.Tuple, ast.List))
              and n.elts and all(isinstance(e, ast.Constant) and type(e.value) is int for e in n.elts)}
    strings = "\n".join(n.value for n in ast.walk(tree)
                        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs)
    return tuples, strings


def _sources():
    from pathlib import Path
    return {p.relative_to(snippets.ROOT).as_posix(): p.read_text() for p in Path(snippets.ROOT, "attnprof").rglob("*.py")}


def test_each_named_shape_is_typed_once_in_any_spelling():
    from attnprof.text import dims, shape as as_text
    for named in stages.SHAPES.values():
        spellings = {as_text(named, "x"), as_text(named), dims(named)}
        typed = sorted(path for path, text in _sources().items()
                       if (found := _typed(text)) and (named in found[0] or any(s in found[1] for s in spellings)))
        assert typed == ["attnprof/model/stages.py"], (named, typed)


def test_no_caption_types_the_heads_and_head_dim_a_run_measured():
    import re
    typed = {path: m.group(0) for path, text in _sources().items()
             if path.startswith("attnprof/site/") and (m := re.search(r"\d+ heads, head dim \d+", text))}
    assert not typed, typed


def _literals(text):
    """Every tuple, list, set or dict literal of a module, as (its string constants, a dict's values)."""
    import ast
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            yield [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)], None
        elif isinstance(node, ast.Dict):
            yield ([k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)],
                   [v.value if isinstance(v, ast.Constant) else None for v in node.values])


def test_the_runs_are_listed_once_and_no_module_retypes_the_stages_sentence_names():
    for path, text in _sources().items():
        for strings, values in _literals(text):
            runs = [s for s in strings if s in names.RUNS]
            if path != "attnprof/model/names.py" and (values is None or all(v is not None for v in values)):
                assert len(runs) < 3, (path, runs)  # a dispatch table of functions per run is not a list of runs
            if values is not None and path != "attnprof/model/stages.py":
                said = [k for k, v in zip(strings, values) if k in STAGES and v in (STAGES[k].short, STAGES[k].title)]
