# Fused attention throughput through PyTorch's SDPA per backend (cuDNN, FlashAttention-2, memory-
# efficient), causal bf16, forward and backward, on the local GPU: the reference for the catalogue's
# attention_efficiency (cuDNN fused attention, as Transformer Engine runs it) and for the llm
# space's share of it that SDPA reaches. Usage: python3 sdpa_reference.py [BF16_PEAK_TFLOPS]
# (989.5 for H100/H200); prints one JSON line per shape and backend, and writes them all to
# $OUT/attention_ref.json when OUT is set.
import torch, json, os, sys
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.backends.cuda.matmul.allow_tf32 = True
dev = torch.device("cuda")
peak = float(sys.argv[1]) * 1e12 if len(sys.argv) > 1 else 989.5e12
out = []
def timed(fn, iters=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / iters / 1e3
for b, h, sq, d in [(1, 32, 4096, 128), (2, 32, 8192, 128), (4, 16, 2048, 128), (1, 64, 16384, 128)]:
    q, k, v = (torch.randn(b, h, sq, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    fwd_flops = 2 * b * h * sq * sq * d  # causal: half of 4 b h s^2 d
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        try:
            with sdpa_kernel(be):
                f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                t_f = timed(f)
                o = f(); g = torch.randn_like(o)
                t_b = timed(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True))
            r = {"backend": name, "b": b, "heads": h, "seq": sq, "head_dim": d, "fwd_s": t_f, "bwd_s": t_b,
                 "fwd_tflops": fwd_flops / t_f / 1e12, "bwd_tflops": 2.5 * fwd_flops / t_b / 1e12,
                 "fwd_fraction_of_bf16_peak": fwd_flops / t_f / peak, "bwd_fraction_of_bf16_peak": 2.5 * fwd_flops / t_b / peak}
        except Exception as ex:
            r = {"backend": name, "b": b, "heads": h, "seq": sq, "error": str(ex).splitlines()[0][:200]}
        out.append(r)
        print(json.dumps(r))
if os.environ.get("OUT"):
    json.dump(out, open(os.path.join(os.environ["OUT"], "attention_ref.json"), "w"), indent=1)
