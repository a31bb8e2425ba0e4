#!/usr/bin/env python3
"""The PyTorch side of the serving benchmark (bench/serving/run.sh).

The same model and the SAME weights as the tkexport package (read out of it), the same streams of
input shapes as bench_serving, drawn by the same generators so that both sides see the same
sizes in the same order:

  fixed    one shape (--fixed, "batch=16" by default; "batch=16 seq=16" for tokmlp)
  cycle    8 sizes per symbol from its min to its max, spaced geometrically, in turn
  uniform  every symbol uniform in its range, a new draw each call (splitmix64, --seed)

for each mode:

  eager            the nn.Module as is
  compile          torch.compile(model, dynamic=True)
  reduce-overhead  torch.compile(model, mode="reduce-overhead", dynamic=True), with
                   torch.compiler.cudagraph_mark_step_begin() before each call (not timed)

One thread. Each timed call is fn(x) then torch.cuda.synchronize(), time.perf_counter around
both; x is a view of the call's shape over one buffer already on the GPU, made before the clock
starts. Reported per mode and stream: median, p90, p99, mean and max microseconds, calls/s
(1 / mean) and the calls on a shape new to the mode. First calls, as bench_serving measures
them: the mode made afresh, its first call on the fixed shape (compilation included), then
--first distinct sizes never run before, each once, then each again.

Models: mlp (bench/e2e's, examples/mlp: Linear 128->64, SiLU, Linear 64->128) and tokmlp
(bench/serving/tokmlp: x + Linear 512->128(GELU-tanh(Linear 128->512(x))) over [batch, seq, 128]).
Importable and --help-able without torch.
"""

import argparse
import json
import math
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "e2e"))
import torch_ref  # noqa: E402  (bench/e2e: the MLP and the weights reader)

# each model's dynamic dims, in the order the package declares them (bench_serving's order)
MODELS = {"mlp": [("batch", 1, 1024)], "tokmlp": [("batch", 1, 64), ("seq", 1, 512)]}
FEATURES = 128
MODES = ["eager", "compile", "reduce-overhead"]
STREAMS = ["fixed", "cycle", "uniform"]
MASK = (1 << 64) - 1


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="mlp")
    p.add_argument("--weights", required=True, help="the package's weights (.safetensors)")
    p.add_argument("--streams", default=",".join(STREAMS), help="some of %s (default all)" % ",".join(STREAMS))
    p.add_argument("--modes", default=",".join(MODES), help="some of %s (default all)" % ",".join(MODES))
    p.add_argument("--fixed", help='the fixed shape, "batch=16 seq=16" (default: every symbol at min(16, max))')
    p.add_argument("--calls", type=int, default=2000, help="timed calls per mode and stream (default 2000)")
    p.add_argument("--warmup", type=int, default=200, help="untimed calls first, from the stream (default 200)")
    p.add_argument("--first", type=int, default=200, help="new shapes timed on their first call (default 200)")
    p.add_argument("--seed", type=int, default=0, help="the uniform stream's seed (default 0, as bench_serving)")
    p.add_argument("--json", required=True, help="the results file to write")
    return p.parse_args(argv)


# --- the streams: the generators of cli/shape_stream.c, value for value ----------------------


def splitmix64(state):
    """(new state, value), as shape_stream.c's splitmix64."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


class Stream:
    def __init__(self, kind, syms, seed=0, fixed=None):
        self.kind, self.syms, self.next = kind, syms, 0
        self.rng = (seed ^ 0x5EED5EED5EED5EED) & MASK
        if kind == "cycle":
            self.rows = [tuple(cycle_value(lo, hi, i, 8) for _, lo, hi in syms) for i in range(8)]
        elif kind == "fixed":
            self.rows = [fixed]

    def draw(self):
        if self.kind == "uniform":
            vals = []
            for _, lo, hi in self.syms:
                self.rng, r = splitmix64(self.rng)
                vals.append(lo + r % (hi - lo + 1))
            return tuple(vals)
        row = self.rows[self.next]
        self.next = (self.next + 1) % len(self.rows)
        return row


def cycle_value(lo_sym, hi, i, n):
    """make_cycle's i-th of n sizes over [lo_sym, hi]."""
    lo = float(max(lo_sym, 1))
    v = lo * math.pow(hi / lo, i / (n - 1)) if hi > lo else lo
    r = lo_sym if i == 0 else hi if i == n - 1 else int(math.floor(v + 0.5))  # llround, v > 0
    return min(max(r, lo_sym), hi)


def parse_fixed(text, syms):
    vals = dict(item.split("=") for item in text.replace(",", " ").split())
    return tuple(int(vals[name]) for name, _, _ in syms)


def shape_of(vals):
    return tuple(vals) + (FEATURES,)


# --- statistics: nearest rank, as call_stats_compute ------------------------------------------


def stats(us):
    if not us:
        return {"n": 0}
    s = sorted(us)
    n = len(s)

    def pct(p):
        k = math.ceil(p / 100.0 * n) - 1
        return s[min(max(k, 0), n - 1)]

    mean = sum(s) / n
    return {"n": n, "median_us": pct(50), "p90_us": pct(90), "p99_us": pct(99), "mean_us": mean, "min_us": s[0],
            "max_us": s[-1]}


# --- the models ---------------------------------------------------------------------------------


def build(torch, model, weights):
    if model == "mlp":
        return torch_ref.build_model(torch, weights)
    nn = torch.nn

    class TokMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1 = nn.Linear(128, 512)
            self.act = nn.GELU(approximate="tanh")
            self.linear2 = nn.Linear(512, 128)

        def forward(self, x):
            return x + self.linear2(self.act(self.linear1(x)))

    m = TokMLP()
    m.load_state_dict(torch_ref.load_state(torch, weights), strict=True)
    return m.to(device="cuda", dtype=torch.bfloat16).eval()


def make_fn(torch, mode, model):
    torch._dynamo.reset()
    if mode == "eager":
        return model, None
    if mode == "compile":
        return torch.compile(model, dynamic=True), None
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    return torch.compile(model, mode="reduce-overhead", dynamic=True), mark


def timed(torch, fn, x, before):
    if before:
        before()
    t0 = time.perf_counter()
    fn(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6


def main(argv):
    args = parse_args(argv)
    syms = MODELS[args.model]
    streams = [s for s in args.streams.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    for s in streams:
        if s not in STREAMS:
            raise SystemExit("torch_serving.py: unknown stream '%s' (expected some of %s)" % (s, ",".join(STREAMS)))
    for m in modes:
        if m not in MODES:
            raise SystemExit("torch_serving.py: unknown mode '%s' (expected some of %s)" % (m, ",".join(MODES)))
    fixed = parse_fixed(args.fixed, syms) if args.fixed else tuple(hi if hi < 16 else max(lo, 16) for _, lo, hi in syms)
    import torch  # here, so that --help and py_compile work without torch

    if not torch.cuda.is_available():
        raise SystemExit("torch_serving.py: torch.cuda is not available")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "model": args.model,
           "symbols": ", ".join("%s in [%d, %d]" % s for s in syms), "fixed": " ".join(
               "%s=%d" % (name, v) for (name, _, _), v in zip(syms, fixed)),
           "calls": args.calls, "warmup": args.warmup, "seed": args.seed, "runs": [], "first_calls": {}, "notes": []}
    model = build(torch, args.model, args.weights)
    torch.manual_seed(0)
    biggest = math.prod(hi for _, _, hi in syms) * FEATURES
    buf = (torch.rand(biggest, device="cuda") * 2 - 1).to(torch.bfloat16)

    def view(vals):
        shape = shape_of(vals)
        return buf[: math.prod(shape)].view(shape)

    def say(text):
        print("torch_serving.py: " + text, file=sys.stderr, flush=True)

    with torch.inference_mode():
        for mode in modes:
            # first calls: the mode made afresh, its first call on the fixed shape, then new sizes
            try:
                fn, before = make_fn(torch, mode, model)
                first_fixed = timed(torch, fn, view(fixed), before)
                seen, new = {fixed}, []
                un = Stream("uniform", syms, args.seed ^ 0xF1F1)
                tries = 0
                while len(new) < args.first and tries < 100 * max(args.first, 1):
                    v = un.draw()
                    tries += 1
                    if v not in seen:
                        seen.add(v)
                        new.append(v)
                t1 = [timed(torch, fn, view(v), before) for v in new]
                t2 = [timed(torch, fn, view(v), before) for v in new]
                res["first_calls"][mode] = {"shapes": len(new), "session_first_call_us": first_fixed,
                                            "first": stats(t1), "second": stats(t2),
                                            "excess": stats([a - b for a, b in zip(t1, t2)])}
                say("%s: first call %.0f us; new shapes: first median %.1f us, again %.1f us"
                    % (mode, first_fixed, stats(t1).get("median_us", 0), stats(t2).get("median_us", 0)))
            except Exception as e:  # a failure is a result, not the end of the run
                msg = torch_ref.failure_text(e)
                res["first_calls"][mode] = "failed (%s)" % msg
                res["notes"].append("%s first calls: %s" % (mode, msg))
                say("%s first calls failed: %s" % (mode, msg))
            for kind in streams:
                row = {"mode": mode, "stream": kind, "threads": 1}
                try:
                    fn, before = make_fn(torch, mode, model)
                    st = Stream(kind, syms, args.seed, fixed)
                    seen, times, is_new = set(), [], []
                    for i in range(args.warmup + args.calls):
                        v = st.draw()
                        first = v not in seen
                        seen.add(v)
                        t = timed(torch, fn, view(v), before)
                        if i >= args.warmup:
                            times.append(t)
                            is_new.append(first)
                    row["stats"] = stats(times)
                    row["calls_per_s"] = 1e6 / row["stats"]["mean_us"] if times else 0.0
                    row["new_shape_calls"] = sum(is_new)
                    row["new_median_us"] = stats([t for t, n in zip(times, is_new) if n]).get("median_us", 0.0)
                    row["repeat_median_us"] = stats([t for t, n in zip(times, is_new) if not n]).get("median_us", 0.0)
                    say("%s %s: median %.1f us, p99 %.1f us, mean %.1f us" % (
                        mode, kind, row["stats"]["median_us"], row["stats"]["p99_us"], row["stats"]["mean_us"]))
                except Exception as e:
                    msg = torch_ref.failure_text(e)
                    row["failed"] = msg
                    res["notes"].append("%s %s: %s" % (mode, kind, msg))
                    say("%s %s failed: %s" % (mode, kind, msg))
                res["runs"].append(row)

    tmp = args.json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
