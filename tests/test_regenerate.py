"""Every record keyed by the code it ran, and `regenerate`: what goes stale, what a machine can retake,
how the records are spread over GPUs (two fake ones here), and what `--dry-run` says on a CPU."""
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from attnprof.model import names, snippets, store
from attnprof.analysis import records
from attnprof import regenerate
from attnprof.model.stages import DEFAULT_SHAPE, STAGES, Stage
from attnprof.model.snippets import ROOT

# one record of each kind, each keyed by several files (two snippets, a provider's, a shown section)
SAMPLES = ["naive_compiled", "flash-bwd", "flash-1x16x8192x128.counters", "run-graphs", "run-decode_step",
           records.CP.records()[0]]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of the code the keys hash (snippets, attnprof/measure, the kernel repositories); the keys read it
    from here."""
    root = tmp_path / "code"
    shutil.copytree(snippets.SNIPPETS, root / "snippets")
    shutil.copytree(ROOT / "attnprof" / "measure", root / "attnprof" / "measure")
    shutil.copytree(ROOT / "kernel-repos", root / "kernel-repos")  # FlashAttention-4's files key its records
    monkeypatch.setattr(names, "CODE_ROOT", root)
    monkeypatch.setattr(snippets, "SNIPPETS", root / "snippets")
    return root


def _made(folder, record):
    """A record as its writer leaves it: the key (and the code hashes) of the code it ran."""
    kind = records.kind_of(record)
    made = {"record": record, "key": kind.key(record), "settings": kind.settings(record), "code": kind.code(record)}
    folder.mkdir(exist_ok=True)
    store.write_json(folder, record, made)


def _edited_inside(file, section):
    """The file with a statement added inside `section` (the code a page shows of it)."""
    lines = file.read_text().splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip().endswith(f"--8<-- [start:{section}]"))
    body = next(i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i].lstrip().startswith(("#", "@")))
    indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]
    return "\n".join(lines[:body] + [f"{indent}_EDITED = 1"] + lines[body:]) + "\n"


@pytest.mark.parametrize("record", SAMPLES)
def test_each_kind_goes_stale_when_its_code_changes_and_not_on_a_comment(record, tree, tmp_path):
    kind = records.kind_of(record)
    sources = kind.sources(record)
    assert all(p.startswith(("snippets/", "kernel-repos/")) or ":" in p for p in sources), sources  # no harness
    assert kind.name == "cp" or any(p.startswith("snippets/") for p in sources), sources
    folder = tmp_path / "captures"
    _made(folder, record)
    assert records._stale(record, folder) is None
    for path in sources:
        file, _, section = (tree / path).as_posix().partition(":")
        file = Path(file)
        source = file.read_text()
        commented = "# a note for the reader\n\n" + source.replace("\ndef ", "\n# why this is so\n\n\ndef ", 1)
        file.write_text(commented + "\n\n# the end\n_OUTSIDE = 1\n" * bool(section) + "\n# the end\n" * (not section))
        assert records._stale(record, folder) is None, f"a comment (or code outside its section) in {path} staled {record}"
        file.write_text(_edited_inside(file, section) if section else source + "\n_EDITED = 1\n")
        why = records._stale(record, folder)
        assert why and f"{record!r} is stale ({path} changed since it was made)" in why, why
        assert records.status(record, folder) == why  # the status says it first, with the command that retakes it
        assert kind.fix(record) in why
        file.write_text(source)
    assert records._stale(record, folder) is None


@pytest.mark.parametrize("record", SAMPLES)
def test_each_kind_goes_stale_when_its_settings_change(record, tree, tmp_path, monkeypatch):
    folder = tmp_path / "captures"
    _made(folder, record)
    monkeypatch.setattr(names, "PROCEDURE", names.PROCEDURE + 1)  # the way of measuring changed
    why = records._stale(record, folder)
    assert why and "its settings changed" in why


def test_counters_go_stale_with_their_metrics_and_a_run_with_its_stages(tree, tmp_path, monkeypatch):
    from attnprof.analysis import counters
    folder = tmp_path / "captures"
    for record in ("flash.counters", "run-sweep", "run-ceilings"):
        _made(folder, record)
    monkeypatch.setitem(counters.METRICS, "extra", "sm__cycles_elapsed.avg")
    assert "stale" in records._stale("flash.counters", folder)
    (tree / "snippets" / "mine.py").write_text("def attention(q, k, v):\n    return q\n")
    monkeypatch.setitem(STAGES, "mine", Stage("mine", "Mine", "mine", sweep=True))
    why = records._stale("run-sweep", folder)
    assert why and "snippets/mine.py" in why and "its settings" in why  # the sweep now measures it
    assert records._stale("run-ceilings", folder) is None  # a run that measures no stage is untouched


def test_every_run_names_a_function_that_exists_and_code_files_that_exist():
    pytest.importorskip("torch")
    from attnprof.measure import runs
    for name in names.RUNS:
        assert callable(runs.function(name)), name
        for path in names.run_sources(name):
            assert names.code_path(path.partition(":")[0]).is_file(), (name, path)
            assert names.source_hash_of([path]), (name, path)  # a section a page shows is there


def test_a_capture_and_a_run_are_written_under_the_key_check_computes(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from attnprof.measure import capture, runs
    for record, made_with in [("flash", names.settings), ("flash-bwd", names.backward_settings)]:
        head = capture.head(STAGES["flash"], record, DEFAULT_SHAPE, "bf16", made_with(DEFAULT_SHAPE, "bf16"), "x")
        kind = records.kind_of(record)
        assert head["key"] == kind.key(record) and head["code"] == kind.code(record)
    monkeypatch.setattr(capture, "require_cuda", lambda *a: None)
    monkeypatch.setattr(capture, "environment", lambda *a: {"device": "NVIDIA H200"})  # a GPU the table knows
    monkeypatch.setattr(runs, "function", lambda name: lambda: [{"measured": 1}])
    assert runs.run(["gqa"], tmp_path) == {"gqa": "ok"}
    assert records.status("run-gqa", tmp_path) is None


# ---- what a machine can take, and the queue over its GPUs ----------------------------------------

def test_what_a_machine_cannot_take_is_said_with_the_reason():
    cp = records.CP.records()[0]
    one = regenerate.Machine(gpus=("0",), ncu=None, missing=frozenset({"sageattention"}))
    assert regenerate.why_not("naive", one) is None
    assert regenerate.why_not(cp, one) == "needs 2 CUDA GPUs, and this machine has 1"
    assert "Nsight Compute" in regenerate.why_not("flash.counters", one)
    assert "sageattention is not installed" in regenerate.why_not("sage", one)
    assert "sageattention is not installed" in regenerate.why_not("run-sweep", one)  # the sweep measures sage
    assert regenerate.why_not("run-ceilings", one) is None
    assert regenerate.why_not("naive", regenerate.Machine()) == "needs a CUDA GPU, and this machine has none"


def test_independent_records_spread_over_two_gpus_and_a_two_gpu_record_runs_alone(tmp_path):
    machine = regenerate.Machine(gpus=("0", "1"), ncu="ncu", missing=frozenset({"sageattention"}))
    cps = records.CP.records()[:2]
    wanted = ["naive", "flash", "math", "naive-bwd", "flash.counters", "run-gqa", "run-e2e", "sage", *cps]
    taken, lock = [], threading.Lock()

    def take(job, devices):  # a fake GPU: takes a moment, and one record breaks
        start = time.monotonic()
        time.sleep(0.05)
        with lock:
            taken.append((job.record, devices, start, time.monotonic()))
        if job.record == "flash":
            raise RuntimeError("a kernel that broke")
        return "retaken"

    said, bar = [], io.StringIO()
    done = regenerate.regenerate(wanted, tmp_path, machine, take=take, say=said.append, stream=bar)
    assert sorted(r for r, *_ in taken) == sorted(set(wanted) - {"sage"})  # each once
    singles = [(devices, start, end) for record, devices, start, end in taken if record not in cps]
    assert {devices for devices, _, _ in singles} == {("0",), ("1",)}  # both GPUs used
    for record, devices, start, end in taken:
        if record in cps:
            assert devices == ("0", "1")
            assert all(e <= start or s >= end for d, s, e in singles), f"{record} did not run alone"
    assert said[0] == ("cannot retake sage here: runs sage (SageAttention 1.0.6), and sageattention is not "
                       "installed here; run `python -m attnprof capture sage` on a CUDA GPU")
    table = regenerate.table(done.results, done.cannot).splitlines()
    assert table[0].split() == ["record", "kind", "GPU", "seconds", "outcome"]
    rows = {line.split()[0]: line for line in table[2:]}
    assert set(rows) == set(wanted)
    assert "failed: RuntimeError: a kernel that broke" in rows["flash"] and "not taken" in rows["sage"]
    assert all(rows[r].rstrip().endswith("retaken") for r in set(wanted) - {"flash", "sage"})
    assert f"{len(wanted) - 1}/{len(wanted) - 1}" in bar.getvalue()  # the progress bar ran to the end
    assert set(done.left) == set(wanted)  # the fake wrote nothing: every record is still missing, and says so


def test_the_dry_run_places_a_two_gpu_record_on_the_whole_machine_first():
    machine = regenerate.Machine(gpus=("0", "1"), ncu="ncu")
    jobs, cannot = regenerate.plan(["naive", "run-sweep", records.CP.records()[0], "flash-bwd"], machine)
    assert not cannot and jobs[0].kind == "cp" and jobs[1].record == "naive"  # then the stage records
    assert jobs[2].record == "run-sweep"  # then the longest first
    placed = regenerate.assign(jobs, machine.gpus)
    assert placed[0][1] == ("0", "1") and {on for _, on in placed[1:]} == {("0",), ("1",)}


def test_counters_records_are_taken_together_one_job_per_gpu():
    """Nsight Compute's child starts once for all the counters records a GPU is given."""
    wanted = ["naive.counters", "flash.counters", "math.counters", "naive", "cudnn.counters"]
    one, two = (regenerate.Machine(gpus=g, ncu="ncu") for g in (("0",), ("0", "1")))
    jobs, _ = regenerate.plan(wanted, one)
    (together,) = [j for j in jobs if j.kind == "counters"]
    assert together.records == ("naive.counters", "flash.counters", "math.counters", "cudnn.counters")
    assert together.record == "4 counters records" and jobs[0].records == ("naive",)  # a stage record first
    jobs, _ = regenerate.plan(wanted, two)
    shares = [j.records for j in jobs if j.kind == "counters"]
    assert sorted(r for share in shares for r in share) == sorted(w for w in wanted if w.endswith(".counters"))
    assert [len(s) for s in shares] == [2, 2]
    jobs, _ = regenerate.plan(["flash.counters"], two)
    assert [(j.record, j.records) for j in jobs] == [("flash.counters", ("flash.counters",))]


def test_a_worker_hands_a_together_kind_its_list_and_any_other_kind_one_record(monkeypatch):
    pytest.importorskip("torch")
    from attnprof.measure import counters, worker
    real_take_counters, seen = worker.take_counters, []
    monkeypatch.setattr(worker, "take_counters", lambda names, out: seen.append(names) or "retaken")
    monkeypatch.setattr(worker, "take_stage", lambda name, out: seen.append(name) or "retaken")
    assert worker.take(["naive.counters", "flash.counters"], "out") == "retaken"
    assert worker.take(["naive"], "out") == "retaken"
    assert seen == [["naive.counters", "flash.counters"], "naive"]
    # the real take over a fake ncu: one outcome for the take, naming what failed
    monkeypatch.setattr(worker, "take_counters", real_take_counters)
    monkeypatch.setattr(counters, "collect", lambda names, out: [{"record": "naive.counters", "kernels": []},
                                                                 {"record": "flash", "error": "a kernel broke"}])
    assert worker.take(["naive.counters", "flash.counters"], "out") == \
        "retaken 1 of 2; flash.counters failed: a kernel broke"


def test_stage_records_come_first_in_the_tables_order_so_their_first_call_compiles():
    machine = regenerate.Machine(gpus=("0",), ncu="ncu")
    wanted = ["run-sweep", "fa4-bwd", "fa4-1x16x8192x128", "flex.counters", "naive_compiled", "fa4", "run-graphs"]
    jobs, _ = regenerate.plan(wanted, machine)
    assert [j.record for j in jobs][:3] == ["fa4", "naive_compiled", "fa4-1x16x8192x128"]  # as STAGE lists them
    assert all(j.kind != "stage" for j in jobs[3:])


def test_a_worker_starts_with_empty_compile_caches_of_its_own_and_is_named_to_its_gpus_quiet(tmp_path, monkeypatch):
    """Each worker compiles into caches of its own, and the live workers of a GPU are named in its file of
    the processes a quiet measurement on that GPU pauses (measure/gpulock.py), which each of them is told;
    a worker replaced (it died or hung) leaves that file."""
    from attnprof.measure import gpulock
    started = {}

    class Popen:
        def __init__(self, cmd, env, **kw):
            self.pid = 1000 + len(started)
            started[env["CUDA_VISIBLE_DEVICES"], self.pid] = env
    monkeypatch.setattr(regenerate.subprocess, "Popen", Popen)
    workers = regenerate.Workers(tmp_path / "out", tmp_path / "logs")
    (tmp_path / "logs").mkdir()
    monkeypatch.setattr(workers, "_heartbeat", lambda: None)
    for device in ("0", "1"):
        workers.start((device,))
    caches = {env[v] for env in started.values() for v in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    assert len(caches) == 2 * 2 * regenerate.WORKERS_PER_GPU and all(c.startswith(str(tmp_path / "logs")) for c in caches)
    files = {d: env[gpulock.QUIET_ENV] for (d, _), env in started.items()}
    assert files == {"0": str(tmp_path / "logs" / "gpu0.pids"), "1": str(tmp_path / "logs" / "gpu1.pids")}
    first = [str(p.pid) for (d, _), (p, _) in workers.procs.items() if d == ("0",)]
    assert open(files["0"]).read().split() == first and len(first) == regenerate.WORKERS_PER_GPU
    with workers.lock:  # worker 1 of GPU 0 replaced, as `take` replaces one that died
        workers.procs.pop((("0",), 1))
        workers.procs[(("0",), 1)] = workers._start(("0",), 1)
    now = open(files["0"]).read().split()
    assert first[1] not in now and sorted(now) == sorted([first[0], first[2], str(workers.procs[(("0",), 1)][0].pid)])


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from Linux's /proc")
def test_a_process_left_paused_by_a_quiet_stretch_is_let_go_once_its_mark_is_old(tmp_path):
    """A measurer killed mid-stretch cannot let its neighbours go; the regeneration does, once the stretch's
    mark is older than gpulock.QUIET_MAX_S (no stretch lasts longer), and not while a stretch may hold."""
    import signal
    import time
    from attnprof.measure import gpulock
    from test_repeat import _state
    workers = regenerate.Workers(tmp_path / "out", tmp_path / "logs")
    (tmp_path / "logs").mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        workers.procs[(("0",), 0)] = (sleeper, None)
        mark = Path(f"{workers.pids(('0',))}.quiet")
        os.kill(sleeper.pid, signal.SIGSTOP)
        mark.touch()  # a stretch that began just now: it may still hold
        resumed = {}
        workers._unpause(resumed)
        time.sleep(0.3)
        assert _state(sleeper.pid) == "T" and resumed == {}
        old = time.time() - gpulock.QUIET_MAX_S - 10
        os.utime(mark, (old, old))  # the same stretch, past the longest a stretch may last
        workers._unpause(resumed)
        end = time.monotonic() + 5
        while _state(sleeper.pid) == "T" and time.monotonic() < end:
            time.sleep(0.02)
        assert _state(sleeper.pid) != "T" and resumed == {("0",): old}
        os.kill(sleeper.pid, signal.SIGSTOP)  # once a mark: a pause after it is that mark's no longer
        workers._unpause(resumed)
        time.sleep(0.3)
        assert _state(sleeper.pid) == "T"
    finally:
        sleeper.kill()
        sleeper.wait()


def _run_cli(*args):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no GPU, whatever this machine has
    return subprocess.run([sys.executable, "-m", "attnprof", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=300)


def test_dry_run_without_a_gpu_names_what_it_cannot_take_and_writes_nothing():
    """On a CPU-only machine, and without PyTorch at all."""
    before = {p.name: p.read_bytes() for p in store.CAPTURES.iterdir()}
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['torch'] = None; from attnprof.cli import main; "
                        "sys.exit(main(['regenerate', '--dry-run', '--all']))"], cwd=ROOT, capture_output=True,
                       text=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), timeout=300)
    assert r.returncode == 0, r.stderr
    every = [record for kind in records.KINDS for record in kind.records()]
    lines = r.stdout.splitlines()
    for record in every:
        (line,) = [l for l in lines if l.startswith(f"cannot retake {record} here: ")]
        assert "needs a CUDA GPU, and this machine has none; run `python -m attnprof " in line
    assert lines[-1] == f"nothing of the {len(every)} record(s) can be taken on this machine"
    assert {p.name: p.read_bytes() for p in store.CAPTURES.iterdir()} == before


def test_skip_leaves_out_the_records_it_names_and_a_bad_name_is_one_line():
    """The plan names every run but the two left out, and says it left them out; a name that is not a record
    of the kinds chosen is one line."""
    r = _run_cli("regenerate", "--dry-run", "--all", "--only", "run", "--skip", "run-sweep,run-verify")
    planned = [l.split()[2] for l in r.stdout.splitlines() if l.startswith("cannot retake ")]
    assert r.returncode == 0 and planned == [r for r in records.RUN.records() if r not in ("run-sweep", "run-verify")]
    assert r.stdout.splitlines()[0] == "leaving out run-sweep, run-verify (--skip)"
    bad = _run_cli("regenerate", "--dry-run", "--skip", "run-sweep,run-swep")
    assert bad.returncode == 2 and bad.stderr.strip() == ("error: bad --skip 'run-sweep,run-swep': run-swep is not a record "
                                                          "the site uses (`python -m attnprof check` counts them by kind)")
    other = _run_cli("regenerate", "--dry-run", "--only", "stage", "--skip", "run-sweep")
    assert other.returncode == 2 and "run-sweep is not a record the site uses of stage" in other.stderr


def test_a_bad_kind_is_one_line():
    r = _run_cli("regenerate", "--dry-run", "--only", "stage,forward")
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: bad --only 'stage,forward': give record kinds, comma-separated, from own, stage, backward, cp, counters, run")


# ---- the build goes through the same code --------------------------------------------------------

@pytest.mark.parametrize("mode", ["auto", "always"])
def test_the_build_retakes_what_the_machine_can_through_regenerate(mode, tmp_path, monkeypatch):
    pytest.importorskip("mkdocs")
    from attnprof.site import hook
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    naive = json.loads((folder / "naive.json").read_text())
    (folder / "naive.json").write_text(json.dumps({**naive, "key": "0" * 16}))  # stale, whatever else is
    monkeypatch.setattr(store, "CAPTURES", folder)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)
    machine = regenerate.Machine(gpus=("0",), ncu=None)  # one GPU, no Nsight Compute
    monkeypatch.setattr(regenerate, "detect", lambda: machine)
    taken, started = [], []

    class Workers:  # the GPU side, faked: what the build hands to the workers
        def __init__(self, out_dir, log_dir):
            assert out_dir == folder
            self.log_dir = log_dir

        def start(self, devices):
            started.append(devices)

        def take(self, job, devices):
            taken.append(job.record)
            return "retaken"

        def busy_text(self, devices, wall_s):
            return f"GPU {devices[0]}: held for measuring 0 s of {wall_s:.0f} s"

        def close(self):
            pass
    monkeypatch.setattr(regenerate, "Workers", Workers)
    lines = []
    monkeypatch.setattr(hook, "log", type("Log", (), {"info": lambda self, m, *a: lines.append(m % a),
                                                      "warning": lambda self, m, *a: lines.append(m % a)})())
    wanted = ([r for kind in records.KINDS for r in kind.records()] if mode == "always"
              else list(records.problems(folder)))
    hook._regenerate(mode)
    can = [r for r in wanted if regenerate.why_not(r, machine) is None]
    assert "naive" in taken and sorted(taken) == sorted(can)
    assert started == [("0",)]  # the one GPU's worker, started before the first record
    cannot = [l for l in lines if l.startswith("cannot retake ")]
    assert len(cannot) == len(wanted) - len(can)
    assert any(l.startswith("cannot retake flash.counters here: needs Nsight Compute") for l in cannot) or \
        "flash.counters" not in wanted
    if mode == "always":
        assert any(l.startswith(f"cannot retake {records.CP.records()[0]} here: needs 2 CUDA GPUs") for l in cannot)


def test_the_neighbour_check_takes_each_record_alone_then_beside_a_busy_gpu(tmp_path):
    """tools/neighbour.py (run on two GPUs) with fake workers: the takes alone come first, the busy ones
    while the other GPU is taken, and the verdict compares the busy median with the spread alone."""
    from tools import neighbour
    log, busy = [], threading.Event()

    class Workers:
        def take(self, job, devices):
            if devices == ("1",):
                busy.set()
                time.sleep(0.5)
                busy.clear()
                return "retaken"
            n = len([1 for r, _ in log if r == job.record])
            log.append((job.record, busy.is_set()))
            store.write_json(tmp_path, job.record, {"event_median_us": 100.0 + n % 3,
                                                    "forward_device_us": 90.0 + (50 if busy.is_set() else 0)})
            time.sleep(0.01)
            return "retaken"
    result = neighbour.compare(Workers(), tmp_path, ["flash", "cudnn"], 3, "run-sweep", settle_s=0.05)
    assert [len(result[r]["alone"]) for r in ("flash", "cudnn")] == [3, 3]
    assert all(b for _, b in log[6:]) and not any(b for _, b in log[:6])  # alone first, then beside the neighbour
    lines = neighbour.verdicts(result)
    assert any(l.startswith("flash event_median_us:") and "within the spread" in l for l in lines)
    assert any(l.startswith("flash forward_device_us:") and "OUTSIDE the spread" in l for l in lines)


# ---- several workers per GPU, and one that hangs ---------------------------------------------------

FAKE_WORKER = '''
import faulthandler, json, os, signal, subprocess, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)


def hang_here(out_dir):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a repeat, say
    with open(os.path.join(out_dir, "child.pid"), "w") as f:
        f.write(str(child.pid))
    while True:
        time.sleep(1)


out_dir, fd = sys.argv[1:3]
answers = os.fdopen(int(fd), "w")
for line in sys.stdin:
    record = json.loads(line)["records"][0]
    print(f"-- {record}: started", flush=True)
    if record == "flash":
        hang_here(out_dir)
    time.sleep(0.2)
    print(f"-- {record}: retaken, 0 s", flush=True)
    answers.write(json.dumps({"records": [record], "outcome": "retaken"}) + "\\n")
    answers.flush()
'''


def test_a_worker_that_makes_no_progress_is_stopped_with_its_stack_and_the_others_go_on(tmp_path, monkeypatch):
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "__init__.py").write_text("")
    (tmp_path / "probes" / "fakeworker.py").write_text(FAKE_WORKER)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(regenerate.Workers, "module", "probes.fakeworker")
    monkeypatch.setattr(regenerate, "TAKE_STALL_S", 3.0)
    monkeypatch.setattr(regenerate, "STOP_GRACE_S", 1.0)
    monkeypatch.setattr(regenerate, "WORKERS_PER_GPU", 2)
    monkeypatch.setattr(regenerate.tempfile, "tempdir", str(tmp_path))  # the logs it keeps, and the GPU's lock
    out = tmp_path / "captures"
    out.mkdir()
    (out / "flash.json").write_text('{"kept": true}')  # the existing capture of the one that hangs
    machine = regenerate.Machine(gpus=("0",), ncu=None)
    wanted = ["naive", "flash", "math", "run-gqa", "run-e2e"]
    said = []
    done = regenerate.regenerate(wanted, out, machine, say=said.append)
    outcomes = {r.record: r.outcome for r in done.results}
    assert set(outcomes) == set(wanted)
    assert all(outcomes[r] == "retaken" for r in wanted if r != "flash")  # the regeneration went on
    assert outcomes["flash"].startswith("failed: the worker gpu0-w0 (pid ") and "made no progress for 3 s" in outcomes["flash"]
    (line,) = [l for l in said if " stopped flash: " in l]
    pid = int(line.split("(pid ")[1].split(")")[0])
    log = line.split("its stack is in ")[1].split(" (its repeats'")[0]
    assert line.split("] ", 1)[1].startswith(f"stopped flash: worker gpu0-w0 (pid {pid}) made no progress for 3 s; "
                                             f"its stack is in {log}")
    stack = open(log).read()
    assert "most recent call first" in stack and "hang_here" in stack  # SIGUSR1 first: faulthandler wrote it
    child = int((out / "child.pid").read_text())
    try:  # its process tree was stopped too (gone, or a zombie no one has reaped yet)
        assert open(f"/proc/{child}/stat").read().split(")")[1].split()[0] in "ZX"
    except FileNotFoundError:
        pass
    assert (out / "flash.json").read_text() == '{"kept": true}'  # nothing lost
    assert any(l.endswith("gpu0-w1 run-gqa: started") for l in said)  # relayed, with the seconds since the start
    stage_workers = {l.split("] ")[1].split()[0] for l in said if l.endswith((" naive: started", " math: started"))}
    assert stage_workers == {"gpu0-w0"}  # the stage records on the GPU's first worker only
    summary = regenerate.summary(done, machine, 12.4)
    assert summary.startswith("regenerate: 5 record(s) taken on 1 GPU(s): 4 retaken or kept, 0 failed, 1 stopped "
                              "for making no progress;") and summary.endswith("12 s in all")


def test_the_stage_records_go_to_each_gpus_first_worker_before_anything_else():
    jobs = [regenerate.Job(r, records.kind_of(r).name, 1, 1.0) for r in ["naive", "flash", "run-sweep", "run-gqa",
                                                                         "math", "flash-bwd"]]
    jobs.sort(key=lambda j: j.kind != "stage")
    seen, lock = [], threading.Lock()

    def take(job, devices):
        with lock:
            seen.append((job.record, devices, regenerate.slot.index))
        time.sleep(0.05)
        return "retaken"
    regenerate.run_jobs(jobs, ("0", "1"), take, per_device=3)
    assert sorted(r for r, _, _ in seen) == sorted(j.record for j in jobs)
    assert all(index == 0 for record, _, index in seen if records.kind_of(record).name == "stage")
    assert any(index > 0 for _, _, index in seen)


def test_a_compared_run_is_measured_in_fresh_processes_only(tmp_path, monkeypatch):
    """Each of a repeated run's processes is started for it (none is the regeneration's worker, which has
    profiled and compiled other records before): its result and repeats come from RUN_CODE's repeats of
    fresh processes, in the order they measured, and the record names them."""
    pytest.importorskip("torch")
    from attnprof.measure import capture, runs
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "__init__.py").write_text("")
    (tmp_path / "probes" / "fake.py").write_text("import os\n\ndef measure():\n    return [{'pid': os.getpid()}]\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("ATTNPROF_GPU_ID", f"test-{os.getpid()}")
    monkeypatch.setitem(names.RUN_CODE, "decode", names.Run("probes.fake.measure", repeats=3))
    monkeypatch.setattr(capture, "require_cuda", lambda *a: None)
    monkeypatch.setattr(capture, "environment", lambda *a: {"device": "NVIDIA H200"})
    monkeypatch.setattr(runs, "function", lambda name: pytest.fail("a repeated run measured in this process"))
    monkeypatch.setattr(runs.records, "RUN", type("Kind", (), {"key": staticmethod(lambda r: "k"),
                                                              "code": staticmethod(lambda r: {}),
                                                              "settings": staticmethod(lambda r: {})}))
    assert runs.run(["decode"], tmp_path) == {"decode": "ok"}
    record = json.loads((tmp_path / "run-decode.json").read_text())
    pids = [record["result"][0]["pid"]] + [r[0]["pid"] for r in record["repeats"]]
    assert len(set(pids)) == 3 and os.getpid() not in pids
    assert [p["pid"] for p in record["processes"]] == pids and [p["order"] for p in record["processes"]] == [0, 1, 2]
    assert record["repeat_errors"] == []
