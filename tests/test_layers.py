"""The package's layers: no import cycle anywhere in attnprof, and each layer imports only those below it."""
import ast
from pathlib import Path

import attnprof

PACKAGE = Path(attnprof.__file__).parent
# a layer imports only itself and the layers listed after it; the top-level modules are the applications
LAYERS = ["site", "measure", "analysis", "model"]
BASE = {"text"}  # attnprof/text.py: units and words, below every layer


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every attnprof module `path` imports, at the top or inside a function."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if not base.startswith("attnprof"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists()
                          or (PACKAGE.parent / sub.replace(".", "/")).is_dir() else base)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("attnprof")}
    return found - {name}


GRAPH = {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def test_no_module_of_attnprof_imports_itself_through_others():
    # a package's __init__ is entered by importing any module under it: an edge to a package is an
    # edge to its __init__, which here imports nothing but attnprof/__init__.py's display
    cycles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(GRAPH.get(node, ())):
            if nxt not in GRAPH:
                continue
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(GRAPH):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else None


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for module, imported in GRAPH.items():
        mine = layer(module)
        if mine is None:
            continue
        below = set(LAYERS[LAYERS.index(mine):])
        for other in imported:
            theirs = layer(other)
            if theirs is None and other.split(".")[-1] not in BASE and other != "attnprof":
                if (mine, other) not in RETAKE:
                    wrong.append(f"{module} imports {other}, an application")
            elif theirs is not None and theirs not in below:
                wrong.append(f"{module} ({mine}) imports {other} ({theirs})")
    assert not wrong, "\n".join(wrong)


RETAKE = {("site", "attnprof.regenerate")}  # the build's hook retakes stale records the way `regenerate` does


def test_every_attnprof_module_imported_anywhere_exists():
    # an import inside a function runs only when it is called: a moved module must not hide there
    missing = {f"{m} imports {other}" for m, imported in GRAPH.items() for other in imported
               if other not in GRAPH and not (PACKAGE.parent / other.replace(".", "/")).is_dir()}
    assert not missing, "\n".join(sorted(missing))
