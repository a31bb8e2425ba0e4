"""PyTorch's F.softmax, F.layer_norm (weight and bias) and F.rms_norm (weight) on the shapes of
bench_rows.c, timed the same way: a sample is `reps` back-to-back calls (each allocates its output from PyTorch's caching
allocator, which costs a few microseconds of host time at most) and
one torch.cuda.synchronize() with time.perf_counter, divided by reps; the figure is the median of
`runs` samples. Prints a markdown table like bench_rows.

    python3 rows_torch.py [--dtype bf16|f16|f32] [--runs 20] [--reps 20]
"""
import argparse

from torch_timing import median_us, need_torch

CASES = [("gpt2 b1 s128", 128, 768), ("gpt2 b8 s1024", 8192, 768), ("scores b8 h12 s1024", 98304, 1024),
         ("llama b4 s512", 2048, 4096)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    torch = need_torch("rows_torch.py")
    F = torch.nn.functional
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    print(f"| case | rows x cols | op | torch {a.dtype} us | GB/s |\n| --- | --- | --- | --- | --- |")
    for what, rows, cols in CASES:
        x = (torch.rand(rows, cols, device="cuda") * 8 - 4).to(dt)
        w = (torch.rand(cols, device="cuda") + 0.5).to(dt)
        b = (torch.rand(cols, device="cuda") * 2 - 1).to(dt)
        ops = [("F.softmax", lambda: F.softmax(x, -1)),
               ("F.layer_norm", lambda: F.layer_norm(x, (cols,), w, b, 1e-5)),
               ("F.rms_norm", lambda: F.rms_norm(x, (cols,), w, 1e-6))]
        for name, fn in ops:
            us = median_us(fn, a.runs, a.reps)
            gb = 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9
            print(f"| {what} | {rows} x {cols} | {name} | {us:.2f} | {gb:.0f} |", flush=True)


if __name__ == "__main__":
    main()
