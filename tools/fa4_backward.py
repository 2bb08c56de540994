"""Does FlashAttention-4's backward run on this GPU? One causal bf16 step through the project's
kernel repository, gradients against a float64 reference, and the kernels the backward launched."""
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from attnprof.model.stages import FA4_REPO
from attnprof.model.snippets import load_snippet

fa4 = load_snippet("fa4").load_flash_attn4(FA4_REPO)
b, s, h, d = 1, 2048, 8, 128
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
out = fa4.flash_attn_func(q, k, v, causal=True)
grad = torch.randn_like(out)
out.backward(grad)  # compiles the backward
q.grad = k.grad = v.grad = None
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    out = fa4.flash_attn_func(q, k, v, causal=True)
    out.backward(grad)
    torch.cuda.synchronize()
q64, k64, v64 = (t.detach().double().transpose(1, 2).requires_grad_() for t in (q, k, v))
F.scaled_dot_product_attention(q64, k64, v64, is_causal=True).backward(grad.double().transpose(1, 2))
for name, got, want in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)):
    got = got.double().transpose(1, 2)
    print(f"{name}: relative error vs float64 {float((got - want).norm() / want.norm()):.2e}")
print("kernels of one forward + backward:")
for e in prof.key_averages():
    if getattr(e, "self_device_time_total", 0) > 0:
        print(f"  {e.count} x {e.key[:140]}")
