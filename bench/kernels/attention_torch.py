"""PyTorch's F.scaled_dot_product_attention on the shapes of bench_attention.c, timed the same
way: q, k, v [B, H, S, D] (B H = --batch-heads, H 8), S 512..4096, D 64 and 128, causal and not; a
sample is `reps` back-to-back calls and one torch.cuda.synchronize() with time.perf_counter; the
figure is the median of `runs` samples. Prints the backend PyTorch chose beside each figure.

    python3 attention_torch.py [--dtype bf16|f16] [--runs 10] [--reps 10] [--batch-heads 32]
"""
import argparse

from torch_timing import median_us, need_torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--batch-heads", type=int, default=32)
    a = ap.parse_args()
    torch = need_torch("attention_torch.py")
    F = torch.nn.functional
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    bh = a.batch_heads
    B, H = (bh // 8, 8) if bh >= 8 else (1, bh)
    print(f"| S | D | causal | torch SDPA {a.dtype} us | TFLOP/s |\n| --- | --- | --- | --- | --- |")
    for D in (64, 128):
        for S in (512, 1024, 2048, 4096):
            for causal in (False, True):
                q, k, v = (torch.rand(B, H, S, D, device="cuda", dtype=torch.float32).mul(4).sub(2).to(dt)
                           for _ in range(3))
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                us = median_us(fn, a.runs, a.reps, warmup=2)
                flops = 4 * bh * S * S * D * (0.5 if causal else 1.0)
                print(f"| {S} | {D} | {'yes' if causal else 'no'} | {us:.1f} | {flops / (us * 1e-6) / 1e12:.1f} |",
                      flush=True)


if __name__ == "__main__":
    main()
