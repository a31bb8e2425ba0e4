"""torch.matmul on the shapes of bench_matmul.c, timed the same way: a sample is `reps`
back-to-back calls and one torch.cuda.synchronize() with time.perf_counter; the figure is the
median of `runs` samples.

    python3 matmul_torch.py [--dtype bf16|f16] [--runs 10] [--reps 20]
"""
import argparse

from torch_timing import median_us, need_torch

CASES = [(96, 1024, 64, 1024, False), (96, 1024, 1024, 64, False), (32, 2048, 128, 2048, False),
         (32, 2048, 2048, 128, False), (8, 1024, 4096, 4096, True)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    torch = need_torch("matmul_torch.py")
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    print(f"| batch | M | K | N | b | torch.matmul {a.dtype} us | TFLOP/s |\n| --- | --- | --- | --- | --- | --- | --- |")
    for batch, m, k, n, shared in CASES:
        x = torch.rand(batch, m, k, device="cuda").mul(2).sub(1).to(dt)
        w = torch.rand(*(() if shared else (batch,)), k, n, device="cuda").mul(2).sub(1).to(dt)
        fn = lambda: torch.matmul(x, w)
        us = median_us(fn, a.runs, a.reps)
        print(f"| {batch} | {m} | {k} | {n} | {'shared' if shared else 'batched'} | {us:.1f} | "
              f"{2 * batch * m * n * k / (us * 1e-6) / 1e12:.1f} |", flush=True)


if __name__ == "__main__":
    main()
