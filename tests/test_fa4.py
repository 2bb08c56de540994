"""FlashAttention-4's loading path on the CPU: this project's kernel repository (the Hub's layout)
resolves through the real `kernels` package, `get_kernel` with the post's call shape imports it via
LOCAL_KERNELS, and every way it cannot load here is one line."""
import sys

import pytest
import torch
from packaging.version import Version

import kernels.backends
import kernels.importer
import kernels.validate
import kernels.variants
from kernels import get_kernel
from kernels.resolver import resolve_local_kernel

from attnprof.measure.numerics import make_inputs, reference, relative_error
from attnprof.model.stages import FA4_REPO, STAGES, ProviderUnavailable
from attnprof.model.snippets import SNIPPETS, load_snippet

CUDA13 = kernels.backends.CUDA(version=Version("13.0"))
FAKE_FA4 = '''
import torch.nn.functional as F
calls = []
def flash_attn_func(q, k, v, causal=False, softmax_scale=None):  # [B, S, H, D] in, like FlashAttention-4
    calls.append(q.shape)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return out.transpose(1, 2), None  # (out, lse), as some versions return
'''


@pytest.fixture
def as_if_cuda(monkeypatch):
    """`kernels` as it behaves under a CUDA 13.0 build of PyTorch, and no kernel loaded yet."""
    monkeypatch.setattr(kernels.variants, "_select_backend", lambda backend: CUDA13)
    monkeypatch.setattr(kernels.validate, "_backend", lambda: CUDA13)
    monkeypatch.setattr(kernels.importer, "_loaded_kernels", {})
    yield
    for name in [m for m in sys.modules if m.split(".")[0] in ("flash_attn", "_attnprof_flash_attn4_cuda_v1")]:
        del sys.modules[name]


def fake_packages(root, with_cutlass=True):
    """Stand-ins for the GPU-only packages the repository declares (and flash_attn.cute itself)."""
    for name in ("einops", "tvm_ffi") + (("cutlass",) if with_cutlass else ()):
        (root / name).mkdir()
        (root / name / "__init__.py").write_text("")
    (root / "flash_attn" / "cute").mkdir(parents=True)
    (root / "flash_attn" / "__init__.py").write_text("")
    (root / "flash_attn" / "cute" / "__init__.py").write_text(FAKE_FA4)


def test_the_repository_has_the_hub_layout_and_resolves(as_if_cuda):
    kernel = resolve_local_kernel(FA4_REPO, backend=None)
    assert kernel.variant_path == FA4_REPO / "build" / "torch-cuda"
    assert str(kernel.metadata.name) == "attnprof-flash-attn4" and kernel.metadata.version == 1
    assert (kernel.variant_path / kernel.metadata.name.python_name / "__init__.py").exists()


def test_get_kernel_imports_it_offline_and_the_snippet_computes_attention(as_if_cuda, tmp_path, monkeypatch):
    fake_packages(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    snippet = load_snippet("fa4")
    fa4 = snippet.load_flash_attn4(FA4_REPO)
    assert fa4.__name__ == "_attnprof_flash_attn4_cuda_v1"
    q, k, v = make_inputs((1, 2, 64, 32), torch.float64, "cpu")
    out = snippet.attention(q, k, v, fa4)
    assert sys.modules["flash_attn.cute"].calls == [(1, 64, 2, 32)]  # handed [B, S, H, D] views
    assert out.shape == q.shape and relative_error(out, reference(q, k, v)) < 1e-12


def test_a_missing_gpu_package_is_one_line(as_if_cuda, tmp_path, monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    fake_packages(tmp_path, with_cutlass=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError) as info:
        load_snippet("fa4").load_flash_attn4(FA4_REPO)
    assert "nvidia-cutlass-dsl" in str(info.value) and "\n" not in str(info.value)


def test_a_cpu_build_of_torch_finds_no_variant(monkeypatch):
    """What `kernels` itself says here: the repository has a CUDA build only."""
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    with pytest.raises(FileNotFoundError, match=r"torch-cuda: backend \(cuda\) does not match system backend \(cpu\)"):
        load_snippet("fa4").load_flash_attn4(FA4_REPO)


def test_without_cuda_the_stage_says_why_in_one_line():
    q, k, v = make_inputs((1, 2, 64, 32), torch.float16, "cpu")
    with pytest.raises(ProviderUnavailable) as info:
        STAGES["fa4"].prepare(q, k, v)
    message = str(info.value)
    assert message.startswith(STAGES["fa4"].provider) and "needs a CUDA GPU" in message and "\n" not in message


def test_the_posts_call_shape_is_kept():
    """The chapter's snippet is `get_kernel(repo_id, version=...)`, the post's call, on our own repository id."""
    source = (SNIPPETS / "fa4.py").read_text()
    assert 'get_kernel("attnprof/flash-attn4", version=1)' in source
    assert get_kernel.__module__ == "kernels.load"
