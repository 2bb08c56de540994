"""Independent repeats run in processes of their own (attnprof/measure/repeat.py)."""
import contextlib
import os

import pytest

from attnprof.measure import repeat

PROBE = '''
import os, time

def timed(pause):
    """Prepares (sleeping `pause` seconds), yields, then measures for 0.2 s: the times of each."""
    start = time.time()
    time.sleep(float(pause))
    prepared = time.time()
    yield
    measuring = time.time()
    time.sleep(0.2)
    return {"pid": os.getpid(), "start": start, "prepared": prepared, "measuring": measuring, "measured": time.time()}

def fails():
    yield
    raise RuntimeError("no GPU here")
'''


def test_each_repeat_is_a_fresh_process_and_a_failing_one_says_why():
    results = repeat.in_processes("repeat.env", 2)
    assert len(results) == 2 and all(r["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] == "1" for r in results)
    assert "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED" not in os.environ  # set for the repeats' processes only
    (failed,) = repeat.in_processes("repeat.no_such_function", 1)
    assert set(failed) == {"error"} and "no_such_function" in failed["error"]


def test_the_repeats_prepare_together_and_measure_one_at_a_time(tmp_path, monkeypatch):
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "__init__.py").write_text("")
    (tmp_path / "probes" / "probe.py").write_text(PROBE)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    runs = repeat.in_processes("probes.probe.timed", 3, "1.5")  # long enough for all three to start, on a busy host
    assert len({r["pid"] for r in runs}) == 3 and os.getpid() not in {r["pid"] for r in runs}
    assert max(r["prepared"] for r in runs) < min(r["measuring"] for r in runs)  # none measures while one prepares
    assert max(r["start"] for r in runs) < min(r["prepared"] for r in runs)  # they prepared at the same time
    for a, b in zip(runs, runs[1:]):  # one at a time, in order
        assert a["measured"] <= b["measuring"]
    with repeat.Started("probes.probe.timed", 3, "0", first=1) as started:  # each one names itself
        named = started.results()
    ids = started.identities
    assert [p["order"] for p in ids] == [1, 2, 3] and [p["pid"] for p in ids] == [r["pid"] for r in named]
    assert all(p["started"] <= r["start"] and p["measured"][0] <= r["measuring"] and r["measured"] <= p["measured"][1]
               for p, r in zip(ids, named))
    assert all(a["measured"][1] <= b["measured"][0] for a, b in zip(ids, ids[1:]))
    assert all(p["gpu"] == [None, None] for p in ids)  # no GPU here: NVML cannot say, and says nothing
    ok, failed = repeat.in_processes("probes.probe.timed", 1, "0"), repeat.in_processes("probes.probe.fails", 1)
    assert "measured" in ok[0] and failed == [{"error": "RuntimeError: no GPU here"}]


def test_a_generator_prepares_before_it_is_ready_and_a_plain_function_is_called_after():
    said = []

    def prepares():
        said.append("prepared")
        yield
        said.append("measured")
        return 42

    def plain():
        said.append("measured")
        return 7
    assert repeat.measured(prepares, ready=lambda: said.append("ready")) == 42
    assert said == ["prepared", "ready", "measured"]
    said.clear()
    assert repeat.measured(plain, ready=lambda: said.append("ready")) == 7 and said == ["ready", "measured"]


# ---- one measurement at a time on a GPU, and a repeat that hangs -----------------------------------

LOCKED = '''
import sys, time
from attnprof.measure import gpulock

out, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with gpulock.measuring(f"probe {i}"):
        start = time.time()
        time.sleep(0.05)
        with open(out, "a") as f:
            f.write(f"{start} {time.time()}\\n")
    time.sleep(0.01)
'''

HANGS = '''
import time

def hangs_measuring():
    yield
    print("measuring", flush=True)
    while True:
        time.sleep(1)  # no output, no end

def hangs_preparing():
    while True:
        time.sleep(1)
    yield
'''


def _gpu(monkeypatch, tmp_path):
    """A fake GPU of its own for this test: its lock file lies under tmp_path."""
    monkeypatch.setenv("ATTNPROF_GPU_ID", f"test-{os.getpid()}-{tmp_path.name}")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_two_processes_never_measure_at_once(tmp_path, monkeypatch):
    import subprocess
    import sys
    _gpu(monkeypatch, tmp_path)
    (tmp_path / "locked.py").write_text(LOCKED)
    outs = [tmp_path / f"{i}.txt" for i in range(3)]
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "locked.py"), str(out), "8"]) for out in outs]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    spans = sorted(tuple(map(float, line.split())) for out in outs for line in out.read_text().splitlines())
    assert len(spans) == 24
    for (a_start, a_end), (b_start, b_end) in zip(spans, spans[1:]):
        assert a_end <= b_start, f"two measured at once: {a_start}-{a_end} and {b_start}-{b_end}"
    from attnprof.measure import gpulock
    assert gpulock.path().parent == tmp_path and gpulock.path().exists()


def test_a_child_measures_under_its_parents_hold_and_released_lets_another_in(tmp_path, monkeypatch):
    """A process started while its parent holds the GPU (Nsight Compute's child, steady's repeats) does not
    wait for it; `released` lets another process measure, then takes the GPU back."""
    import subprocess
    import sys
    import time
    from attnprof.measure import gpulock
    _gpu(monkeypatch, tmp_path)
    (tmp_path / "locked.py").write_text(LOCKED)
    with gpulock.measuring("parent"):
        assert os.environ[gpulock.HELD_ENV] == str(os.getpid())
        child = subprocess.run([sys.executable, str(tmp_path / "locked.py"), str(tmp_path / "child.txt"), "1"],
                               timeout=60)
        assert child.returncode == 0 and (tmp_path / "child.txt").exists()
        other = subprocess.Popen([sys.executable, str(tmp_path / "locked.py"), str(tmp_path / "other.txt"), "1"],
                                 env={k: v for k, v in os.environ.items() if k != gpulock.HELD_ENV})
        time.sleep(1.5)
        assert not (tmp_path / "other.txt").exists()  # it waits while this process holds the GPU
        with gpulock.released():
            assert other.wait(timeout=60) == 0 and (tmp_path / "other.txt").exists()
        assert "parent" in gpulock.holder()  # held again
    assert gpulock.HELD_ENV not in os.environ


def test_each_hold_of_the_gpu_is_written_down_and_summed(tmp_path, monkeypatch):
    """Under a regeneration (HOLDS_ENV), each stretch the GPU was held is written as it ends, a `released`
    stretch left out; `holds` sums them by what held it, and the regeneration's line says the share."""
    import time
    from attnprof import regenerate
    from attnprof.measure import gpulock
    _gpu(monkeypatch, tmp_path)
    monkeypatch.setenv(gpulock.HOLDS_ENV, str(tmp_path / "gpu0.holds"))
    with gpulock.measuring("run-a repeat 0"):
        time.sleep(0.2)
        with gpulock.released():
            time.sleep(0.5)  # not held
        time.sleep(0.2)
    with gpulock.measuring("run-b"):
        time.sleep(0.1)
    (tmp_path / "gpu0.holds").open("a").write("a torn line\n")
    total, by = gpulock.holds(tmp_path / "gpu0.holds")
    assert set(by) == {"run-a repeat 0", "run-b"}
    assert 0.39 <= by["run-a repeat 0"] < 0.65 and 0.09 <= by["run-b"] < 0.3 and total == pytest.approx(sum(by.values()))
    workers = regenerate.Workers(tmp_path / "out", tmp_path)
    assert workers.holds(("0",)) == tmp_path / "gpu0.holds"
    line, *table = workers.busy_text(("0",), 10.0).splitlines()
    assert line.startswith(f"GPU 0: held for measuring {total:.0f} s of 10 s") and "most by run-a repeat 0" in line
    rows = [r.split() for r in table[2:]]  # under the header and its rule: every holder, by when it first held
    assert [r[0] for r in rows] == ["run-a", "run-b"] and [r[-1] for r in rows] == ["2", "1"]  # run-a: two stretches
    assert float(rows[0][-2]) == pytest.approx(by["run-a repeat 0"], abs=0.05)


def _probe(tmp_path, monkeypatch, source):
    (tmp_path / "probes").mkdir(exist_ok=True)
    (tmp_path / "probes" / "__init__.py").write_text("")
    (tmp_path / "probes" / "hang.py").write_text(source)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


@pytest.mark.parametrize("function, when", [("hangs_measuring", "measuring"), ("hangs_preparing", "preparing")])
def test_a_repeat_that_makes_no_progress_is_stopped_with_its_stack_in_its_log(function, when, tmp_path, monkeypatch,
                                                                               capsys):
    _gpu(monkeypatch, tmp_path)
    _probe(tmp_path, monkeypatch, HANGS)
    monkeypatch.setattr(repeat, "STALL_S", 3.0)
    monkeypatch.setattr(repeat, "STOP_GRACE_S", 1.0)
    monkeypatch.setenv(repeat.LOG_DIR_ENV, str(tmp_path))
    with repeat.Started(f"probes.hang.{function}", 1, first=1, what="run-probe") as started:
        pid = started.processes[0][0].pid
        (result,) = started.results()
    assert started.stopped == ["run-probe repeat 1"] and started.identities == [None]
    assert f"made no progress {when} for 3 s and was stopped" in result["error"]
    (line,) = [l for l in capsys.readouterr().out.splitlines() if l.startswith("-- stopped ")]
    log = started.folder / "0.log"
    assert line == f"-- stopped run-probe repeat 1 (pid {pid}): made no progress {when} for 3 s; its stack is in {log}"
    stack = log.read_text()  # kept, with the stack faulthandler wrote on SIGUSR1
    assert "most recent call first" in stack and f'hang.py", line' in stack and function in stack


def test_the_sweep_prepares_compiled_and_loaded_paths_before_it_measures(tmp_path, monkeypatch):
    """A compile or a kernel's loading, at every shape, comes before the sweep's `yield` (other processes
    measure meanwhile); the memory-hungry paths (their OOM points) prepare at their shape, holding the GPU,
    and every path of a shape is timed together, holding it."""
    pytest.importorskip("torch")
    from attnprof.measure import gpulock, repeat, sweep
    from attnprof.model.stages import STAGES
    _gpu(monkeypatch, tmp_path)
    seen, timed = [], []

    def held():
        return gpulock._held["file"] is not None
    monkeypatch.setattr(sweep, "prepared", lambda path, shape, fresh=True: (seen.append((path, shape, held())), ({"path": path}, None))[1])
    monkeypatch.setattr(sweep, "timed_together", lambda ready, calls, seed=None, **kw: timed.append(([r["path"] for r, _ in ready], held())) or [r for r, _ in ready])
    monkeypatch.setattr(sweep, "Progress", lambda total: (lambda label: None))
    with contextlib.ExitStack() as hold:  # as repeat.watched holds the GPU: from `ready` on
        rows = repeat.measured(sweep.sweep, None, (512, 1024), (64,),
                               ready=lambda: hold.enter_context(gpulock.measuring("run-sweep")))
    paths = sweep.select(sweep=True)
    loaded = [p for p in paths if STAGES[p].fresh_compile or STAGES[p].provider != "PyTorch"]
    assert len(rows) == 2 * len(paths) and len(seen) == len(rows)
    assert timed == [(paths, True), (paths, True)]  # a shape's paths together, in the table's order
    assert seen[:2 * len(loaded)] == [(p, s, False) for s in ((32, 16, 512, 64), (16, 16, 1024, 64)) for p in loaded]
    assert all(held for _, _, held in seen[2 * len(loaded):]) and {"flex", "fa4"} <= set(loaded)
    assert ("math", (32, 16, 512, 64), True) in seen


def test_a_compile_while_the_sweep_times_fails_its_point_instead_of_being_timed():
    """Under the sweep's static compiles each shape's compile is kept, so timing one compiles nothing; a
    shape not prepared before would compile while timed, and is refused (torch.compiler's fail_on_recompile)."""
    torch = pytest.importorskip("torch")
    from attnprof.measure import sweep
    a, b = (2, 2, 64, 32), (1, 2, 128, 32)
    with sweep.static_compiles(2):
        torch._dynamo.reset()
        row_a, forward_a = sweep.prepared("flex", a, torch.float32, fresh=False)
        with torch.compiler.set_stance("fail_on_recompile"), torch.no_grad():
            forward_a()  # its own compile, kept (timed, as prepared, without autograd)
            row_b, forward_b = sweep.prepared("flex", b, torch.float32, fresh=False)
    assert forward_a is not None and "unavailable" not in row_a
    assert forward_b is None and "recompil" in row_b["unavailable"].lower(), row_b


def test_measuring_cores_are_whole_cores_whose_other_threads_no_compile_shares(tmp_path):
    """16 hardware threads on 8 cores, Linux's usual numbering (thread i and i+8 share a core): the measuring
    threads' siblings are left idle, so a neighbour's compile never shares a core with a CPU-timed
    measurement; without a topology every thread is a core of its own."""
    from attnprof.measure import gpulock
    for cpu in range(16):
        (tmp_path / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (tmp_path / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(f"{cpu % 8},{cpu % 8 + 8}\n")
    measure, prepare = gpulock.split_cpus(range(16), tmp_path)
    assert measure == [6, 7] and prepare == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]
    assert not {s for c in measure for s in gpulock.siblings(c, tmp_path)} & set(prepare)
    measure, prepare = gpulock.split_cpus(range(16), tmp_path / "none")
    assert measure == [12, 13, 14, 15] and prepare == list(range(12))
    assert gpulock.split_cpus(range(4), tmp_path) == (list(range(4)), list(range(4)))


def _state(pid: int) -> str:
    """A process's state letter from /proc: "T" while stopped."""
    stat = open(f"/proc/{pid}/stat").read()
    return stat[stat.rindex(")") + 2]


def _settle(pid: int, want: str, within: float = 5.0) -> str:
    import time
    end = time.monotonic() + within
    while _state(pid) != want and time.monotonic() < end:
        time.sleep(0.02)
    return _state(pid)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from Linux's /proc")
def test_a_cpu_timed_measurement_pauses_the_gpus_other_processes_and_lets_them_go(tmp_path, monkeypatch):
    """Under a regeneration (QUIET_ENV names its workers), a CPU-timed measurement stops every other
    worker and what runs under it, but none of its own line, while it holds the GPU; `released` and its end
    let them go on, and so does QUIET_MAX_S; Nsight Compute's kind (not CPU-timed) pauses no one."""
    import subprocess
    import sys
    import time
    from attnprof.measure import gpulock
    _gpu(monkeypatch, tmp_path)
    sleeper = (f"{sys.executable} -c \"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
               f"'import time; time.sleep(60)']); time.sleep(60)\" >/dev/null 2>&1 & echo $!")
    # the other workers: not this process's children (a regeneration's workers are siblings)
    others = [int(subprocess.run(["sh", "-c", sleeper], capture_output=True, text=True).stdout) for _ in range(2)]
    own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # this process's child
    pids = tmp_path / "gpu0.pids"
    pids.write_text("".join(f"{p}\n" for p in others) + f"{os.getpid()}\n")
    monkeypatch.setenv(gpulock.QUIET_ENV, str(pids))
    try:
        time.sleep(1.0)  # the sleepers' own children have started
        grandchildren = [p for o in others for p in gpulock.descendants(o)]
        assert len(grandchildren) == 2 and sorted(gpulock.neighbours()) == sorted(others + grandchildren)
        assert gpulock.quieted() == 0.0
        with gpulock.measuring("run-timing"):
            assert all(_settle(p, "T") == "T" for p in others + grandchildren)
            assert _state(own.pid) != "T" and _state(os.getpid()) != "T"
            assert gpulock.quieted() > 0
            with gpulock.released():  # a compile: the others prepare meanwhile
                assert all(_settle(o, "S") != "T" for o in others)
            assert all(_settle(o, "T") == "T" for o in others)
        assert all(_settle(p, "S") != "T" for p in others + grandchildren)
        with gpulock.measuring("16 counters records", cpu_timed=False):
            time.sleep(0.3)
            assert all(_state(o) != "T" for o in others)
        monkeypatch.setattr(gpulock, "QUIET_MAX_S", 0.5)
        with gpulock.measuring("a long one"):
            assert _settle(others[0], "T") == "T"
            assert _settle(others[0], "S", within=5.0) != "T"  # let go at QUIET_MAX_S, still measuring
    finally:
        for q in [p for o in others for p in gpulock.descendants(o)] + others + [own.pid]:
            try:
                os.kill(q, 9)
            except ProcessLookupError:
                pass
        own.wait()
    monkeypatch.delenv(gpulock.QUIET_ENV)
    assert gpulock.neighbours() == [] and gpulock.quieted() == 0.0  # outside a regeneration: no one to pause


def test_the_sweep_is_not_quiet_and_a_run_says_so_through_its_function():
    pytest.importorskip("torch")
    from attnprof.measure import sweep, timing
    assert sweep.sweep.quiet is False and getattr(timing.timing, "quiet", None) is None
