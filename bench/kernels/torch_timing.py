"""How the PyTorch side of bench/kernels times a call, the way the C benches (bench_gpu.h) do:
`warmup` calls and a synchronize, then `runs` samples of `reps` back-to-back calls and one
torch.cuda.synchronize() with time.perf_counter; the median sample in microseconds a call."""
import statistics
import sys
import time


def need_torch(prog):
    """torch, imported once the command line is read (so that --help works without it), or exit
    with one line saying what is missing."""
    try:
        import torch
    except ImportError as e:
        sys.exit("%s: needs PyTorch (%s)" % (prog, e))
    return torch


def median_us(fn, runs, reps, warmup=3):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / reps * 1e6)
    return statistics.median(samples)
