"""The torch line: the site side and the CLI's read-only commands work where torch cannot be imported."""
import subprocess
import sys

from attnprof.model.snippets import ROOT

BLOCKED = """
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
import pkgutil, attnprof, attnprof.site
for m in ["attnprof." + name for _, name, _ in pkgutil.iter_modules(attnprof.__path__) if name not in ("measure", "__main__")]:
    __import__(m)
for m in pkgutil.iter_modules(attnprof.site.__path__):
    __import__("attnprof.site." + m.name)
from attnprof.cli import main
for argv in (["show", "naive"], ["show", "flash", "--json"], ["check"], ["explain", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"]):
    assert main(argv) == 0, argv
import markdown
from attnprof.site.build import Build
from attnprof.site.extension import PiecesExtension
html = markdown.markdown("<!-- attnprof: trace naive -->", extensions=[PiecesExtension(build=Build())])
assert "<svg" in html
print("torch-free: ok")
"""


def test_site_and_read_only_cli_import_no_torch():
    r = subprocess.run([sys.executable, "-c", BLOCKED], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "torch-free: ok" in r.stdout, r.stderr[-2000:]


def test_measure_does_need_torch():  # the line is where we say it is: the blocker above is real
    r = subprocess.run([sys.executable, "-c", 'import sys; sys.modules["torch"] = None; import attnprof.measure.numerics'],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "import of torch halted" in r.stderr
