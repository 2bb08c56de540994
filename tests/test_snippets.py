"""Every snippet against the float64 reference, on fresh random inputs, on the CPU."""
import torch
import pytest

from attnprof.measure.numerics import make_inputs, reference, relative_error
from attnprof.model.stages import STAGES

CPU_STAGES = ["naive", "inplace", "math", "flash", "auto"]  # efficient and cuDNN need a GPU


def run(stage_name, shape, dtype, seed):
    stage = STAGES[stage_name]
    q, k, v = make_inputs(shape, dtype, "cpu", seed=seed)
    with stage.context(), torch.no_grad():
        out = stage.prepare(q, k, v)()
    return out, relative_error(out, reference(q, k, v))


@pytest.mark.parametrize("stage", CPU_STAGES)
def test_float32_matches_float64(stage):
    seed = torch.seed() % 2**31  # fresh inputs every run
    out, err = run(stage, (2, 3, 96, 32), torch.float32, seed)
    assert out.shape == (2, 3, 96, 32)
    assert err < 1e-5, f"{stage}: relative error {err} (seed {seed})"


@pytest.mark.parametrize("stage", CPU_STAGES)
def test_bf16_lands_in_the_expected_band(stage):
    seed = torch.seed() % 2**31
    _, err = run(stage, (1, 2, 128, 64), torch.bfloat16, seed)
    assert 1e-4 < err < 2e-2, f"{stage}: relative error {err} (seed {seed})"


def test_nan_never_passes():
    ref = reference(*make_inputs((1, 1, 8, 4), torch.float32, "cpu"))
    bad = ref.clone()
    bad[0, 0, 3, 1] = float("nan")
    err = relative_error(bad, ref)
    assert not err < 1e-5  # NaN compares false with everything


def test_first_query_sees_only_itself():
    """Causality: the first output row is exactly v's first row."""
    q, k, v = make_inputs((1, 1, 16, 8), torch.float64, "cpu", seed=3)
    for stage in ("naive", "inplace"):
        out = STAGES[stage].prepare(q, k, v)()
        torch.testing.assert_close(out[0, 0, 0], v[0, 0, 0])


def test_compiled_naive_matches_on_cpu():
    _, err = run("naive_compiled", (1, 2, 64, 32), torch.float32, torch.seed() % 2**31)
    assert err < 1e-5


def test_flex_attention_compiles_and_matches_on_cpu():
    _, err = run("flex", (1, 2, 128, 32), torch.float32, torch.seed() % 2**31)
    assert err < 1e-5


@pytest.mark.parametrize("stage, module", [("sage", "sageattention"), ("hub", "kernels")])
def test_a_provider_that_cannot_load_says_why(stage, module):
    """Where the package is missing (as in CI), loading fails with one line naming it; where it is
    installed, the provider must compute attention."""
    import importlib.util
    from attnprof.model.stages import ProviderUnavailable
    q, k, v = make_inputs((1, 2, 64, 32), torch.float16, "cpu")
    if importlib.util.find_spec(module) is None:
        with pytest.raises(ProviderUnavailable) as info:
            STAGES[stage].prepare(q, k, v)
        assert module in str(info.value) and "\n" not in str(info.value)
        assert str(info.value).startswith(STAGES[stage].provider)
    else:
        try:
            out = STAGES[stage].prepare(q, k, v)()
        except ProviderUnavailable as e:  # installed but unusable here (e.g. no GPU, no Hub): a reason
            assert "\n" not in str(e)
        else:
            assert relative_error(out, reference(q, k, v)) < 5e-2


def test_the_code_hash_is_the_same_under_every_python_at_hand():
    """Captures are keyed on the GPU machine (another Python) and checked here: the hash of a snippet
    must not depend on the interpreter (token numbers, f-string tokens)."""
    import shutil
    import subprocess
    import sys
    from attnprof.model.snippets import ROOT, SNIPPETS, code_hash
    here = [code_hash(p) for p in sorted(SNIPPETS.glob("*.py"))]
    others = [p for p in (shutil.which(f"python3.{minor}") for minor in (10, 11, 12, 13)) if p]
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from attnprof.model.stages import SNIPPETS, code_hash; "
              "print(' '.join(code_hash(p) for p in sorted(SNIPPETS.glob('*.py'))))")
    compared = 0
    for python in others:
        r = subprocess.run([python, "-c", script, str(ROOT)], capture_output=True, text=True, timeout=60)
        if r.returncode == 0:  # an interpreter too old for the package's syntax says so and is passed over
            assert r.stdout.split() == here, python
            compared += 1
    assert compared or sys.version_info[:2] == (3, 11), "no other Python to compare with"
