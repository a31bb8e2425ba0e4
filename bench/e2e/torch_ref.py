#!/usr/bin/env python3
"""The PyTorch side of the end-to-end benchmark (bench/e2e/run.sh).

Loads the SAME safetensors weights as the tkexport package (parsed by hand: the safetensors
package is not needed), builds Linear(128, 64) -> SiLU -> Linear(64, 128) in bf16 on CUDA, and
for each batch measures the host round trip per call (inputs already on the GPU, one call, then
torch.cuda.synchronize(); median of --iters after --warmup) for:

  eager            the nn.Module as is
  compile          torch.compile(model)                      (mode "default")
  reduce-overhead  torch.compile(model, mode="reduce-overhead") (CUDA graphs)
  aoti             torch._inductor.aoti_compile_and_package + aoti_load_package, with a dynamic
                   batch; compiled and run in SUBPROCESSES (its loader has crashed before): a
                   crash is recorded as "crashed (signal N)" instead of ending the benchmark
  floor            one tiny kernel + synchronize (and synchronize alone): what any call costs

It also compares tkexport's outputs (--tk-outputs DIR/out_b<B>/out0.npy) and the compiled
variants' outputs with eager PyTorch: max |difference|, that over max |eager| (the target is
<= 1e-2) and the count outside 1e-2 + 1e-2 |eager|. Everything goes into --json.

Importable and --help-able without torch (the GPU machine has torch; a CI check only runs
`python3 -m py_compile` and `--help`).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npy_io  # noqa: E402

MODES = ["eager", "compile", "reduce-overhead", "aoti", "floor"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", required=True, help="the MLP's .safetensors (example_mlp --write-weights)")
    p.add_argument("--inputs-dir", required=True, help="folder with x_b<B>.npy (float32 [B, 128])")
    p.add_argument("--batches", default="1,16,256,1024", help="comma-separated batch sizes (default 1,16,256,1024)")
    p.add_argument("--tk-outputs", help="folder with out_b<B>/out0.npy written by tkexport run, to compare")
    p.add_argument("--iters", type=int, default=2000, help="timed calls per batch and mode (default 2000)")
    p.add_argument("--warmup", type=int, default=200, help="untimed calls first (default 200)")
    p.add_argument("--modes", default=",".join(MODES), help="which of %s (default all)" % ",".join(MODES))
    p.add_argument("--workdir", default=None, help="where the AOTI package goes (default: beside --json)")
    p.add_argument("--json", required=True, help="the results file to write")
    p.add_argument("--aoti-worker", choices=["compile", "run"], help=argparse.SUPPRESS)
    p.add_argument("--package", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# --- the model --------------------------------------------------------------------------------


def load_state(torch, weights_path):
    """{name: CPU tensor} of a .safetensors file (BF16, F16 or F32), read by hand."""
    dtypes = {"BF16": (torch.int16, torch.bfloat16), "F16": (torch.int16, torch.float16), "F32": (torch.float32, None)}
    state = {}
    for name, (dtype, shape, raw) in npy_io.read_safetensors(weights_path).items():
        if dtype not in dtypes:
            raise SystemExit("torch_ref.py: %s: tensor %s has dtype %s (expected BF16, F16 or F32)" % (weights_path, name, dtype))
        load_as, view_as = dtypes[dtype]
        t = torch.frombuffer(bytearray(raw), dtype=load_as)
        if view_as is not None:
            t = t.view(view_as)
        state[name] = t.reshape(shape).clone()
    return state


def build_model(torch, weights_path):
    """The MLP with the state_dict names of examples/mlp/model.c, on cuda in bf16."""
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1 = nn.Linear(128, 64)
            self.act = nn.SiLU()
            self.linear2 = nn.Linear(64, 128)

        def forward(self, x):
            return self.linear2(self.act(self.linear1(x)))

    model = MLP()
    model.load_state_dict(load_state(torch, weights_path), strict=True)
    return model.to(device="cuda", dtype=torch.bfloat16).eval()


def load_input(torch, inputs_dir, batch):
    values, shape, _ = npy_io.read_npy(os.path.join(inputs_dir, "x_b%d.npy" % batch))
    # float32 -> bf16 rounds to nearest even, as tkexport run's .npy reader does
    return torch.tensor(values, dtype=torch.float32).reshape(shape).to(device="cuda", dtype=torch.bfloat16)


def compare(torch, got, ref):
    """Errors of got against ref (both converted to float32 on the CPU)."""
    got = got.float().cpu().reshape(ref.shape)
    ref = ref.float().cpu()
    diff = (got - ref).abs()
    max_abs = diff.max().item() if diff.numel() else 0.0
    scale = ref.abs().max().item() if ref.numel() else 0.0
    outside = int((diff > 1e-2 + 1e-2 * ref.abs()).sum().item())
    return {"max_abs": max_abs, "max_rel": max_abs / scale if scale else max_abs, "outside": outside, "n": ref.numel()}


# --- timing -----------------------------------------------------------------------------------


def time_calls(torch, fn, iters, warmup, before=None):
    """Median microseconds of fn() + torch.cuda.synchronize(), after warmup calls."""
    sync = torch.cuda.synchronize
    for _ in range(warmup):
        if before:
            before()
        fn()
        sync()
    times = []
    clock = time.perf_counter
    for _ in range(iters):
        if before:
            before()
        t0 = clock()
        fn()
        sync()
        times.append(clock() - t0)
    return statistics.median(times) * 1e6


def worker_command(args, phase, package):
    cmd = [sys.executable, os.path.abspath(__file__), "--aoti-worker", phase, "--package", package,
           "--weights", args.weights, "--inputs-dir", args.inputs_dir, "--batches", args.batches,
           "--iters", str(args.iters), "--warmup", str(args.warmup), "--json", package + "." + phase + ".json"]
    return cmd


def run_worker(args, phase, package):
    """Runs an AOTI phase in a subprocess: (result dict or None, status text)."""
    out = package + "." + phase + ".json"
    if os.path.exists(out):
        os.remove(out)
    t0 = time.perf_counter()
    proc = subprocess.run(worker_command(args, phase, package), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode < 0:
        sys.stderr.write(proc.stderr[-4000:])
        return None, "crashed (signal %d) in %s" % (-proc.returncode, phase)
    if proc.returncode != 0 or not os.path.exists(out):
        sys.stderr.write(proc.stderr[-4000:])
        last = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        return None, "failed in %s (exit %d): %s" % (phase, proc.returncode, last[-1][:200] if last else "no message")
    with open(out) as f:
        res = json.load(f)
    res.setdefault("wall_s", secs)
    return res, "ok"


def failure_text(e):
    """An exception as one short line: its type and the first line of its message."""
    return "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")


def first_output(y):
    """The tensor of a single-output call (AOTInductor's runner may return a list)."""
    return y[0] if isinstance(y, (list, tuple)) else y


def aoti_worker(args, torch, batches):
    """The subprocess side: 'compile' exports with a dynamic batch and packages; 'run' loads the
    package and times it per batch (a batch that fails is recorded, the others still run),
    comparing with eager."""
    model = build_model(torch, args.weights)
    result = {}
    if args.aoti_worker == "compile":
        example = torch.randn(16, 128, device="cuda", dtype=torch.bfloat16)
        try:
            batch = torch.export.Dim("batch", min=1, max=1024)
        except Exception:  # newer releases may prefer Dim.DYNAMIC
            batch = torch.export.Dim.DYNAMIC
        with torch.no_grad():
            t0 = time.perf_counter()
            ep = torch.export.export(model, (example,), dynamic_shapes={"x": {0: batch}})
            path = torch._inductor.aoti_compile_and_package(ep, package_path=args.package)
            result["compile_s"] = time.perf_counter() - t0
        result["package"] = path
    else:
        runner = torch._inductor.aoti_load_package(args.package)
        result["latency_us"], result["errors"] = {}, {}
        with torch.inference_mode():
            for b in batches:
                x = load_input(torch, args.inputs_dir, b)
                try:
                    result["errors"][str(b)] = compare(torch, first_output(runner(x)), model(x))
                    result["latency_us"][str(b)] = time_calls(torch, lambda: runner(x), args.iters, args.warmup)
                except Exception as e:
                    msg = failure_text(e)
                    result["latency_us"][str(b)] = "failed (%s)" % msg
                print("torch_ref.py: aoti batch %d: %s" % (b, result["latency_us"][str(b)]), file=sys.stderr)
    with open(args.json, "w") as f:
        json.dump(result, f)
    return 0


def main(argv):
    args = parse_args(argv)
    batches = [int(b) for b in args.batches.split(",") if b]
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            raise SystemExit("torch_ref.py: unknown mode '%s' (expected some of %s)" % (m, ",".join(MODES)))
    import torch  # here, so that --help and py_compile work without torch

    if args.aoti_worker:
        return aoti_worker(args, torch, batches)
    if not torch.cuda.is_available():
        raise SystemExit("torch_ref.py: torch.cuda is not available")

    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "iters": args.iters,
           "warmup": args.warmup, "batches": batches, "latency_us": {}, "errors": {}, "notes": []}
    try:
        import triton

        res["triton"] = triton.__version__
    except Exception:
        res["triton"] = None
    model = build_model(torch, args.weights)
    inputs = {b: load_input(torch, args.inputs_dir, b) for b in batches}
    with torch.inference_mode():
        refs = {b: model(inputs[b]) for b in batches}

        # tkexport's outputs against eager
        if args.tk_outputs:
            res["errors"]["tkexport"] = {}
            for b in batches:
                path = os.path.join(args.tk_outputs, "out_b%d" % b, "out0.npy")
                if not os.path.exists(path):
                    res["notes"].append("no tkexport output %s" % path)
                    continue
                values, shape, _ = npy_io.read_npy(path)
                got = torch.tensor(values, dtype=torch.float32).reshape(shape)
                res["errors"]["tkexport"][str(b)] = compare(torch, got, refs[b])

        def measure(name, make, before=None):
            """Times make()'s function per batch; a failure (compiling included) is recorded."""
            res["latency_us"][name] = {}
            res["errors"].setdefault(name, {})
            fn_of_x, failure = None, None
            try:
                fn_of_x = make()
            except Exception as e:
                failure = e
            for b in batches:
                x = inputs[b]
                try:
                    if failure is not None:
                        raise failure
                    t0 = time.perf_counter()
                    y = fn_of_x(x)
                    torch.cuda.synchronize()
                    first = time.perf_counter() - t0
                    res["errors"][name][str(b)] = compare(torch, first_output(y), refs[b])
                    res["latency_us"][name][str(b)] = time_calls(torch, lambda: fn_of_x(x), args.iters, args.warmup, before)
                    res.setdefault("first_call_s", {}).setdefault(name, {})[str(b)] = first
                except Exception as e:  # a compile failure is a result, not the end of the run
                    msg = failure_text(e)
                    res["latency_us"][name][str(b)] = "failed (%s)" % msg
                    res["notes"].append("%s batch %d: %s" % (name, b, msg))
                print("torch_ref.py: %s batch %d: %s" % (name, b, res["latency_us"][name][str(b)]), file=sys.stderr)

        if "eager" in modes:
            measure("eager", lambda: model)
        if "compile" in modes:
            torch._dynamo.reset()
            measure("compile", lambda: torch.compile(model))
        if "reduce-overhead" in modes:
            torch._dynamo.reset()
            mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
            measure("reduce-overhead", lambda: torch.compile(model, mode="reduce-overhead"), before=mark)
        if "floor" in modes:
            tiny = torch.zeros(1, device="cuda")
            res["floor_us"] = {
                "kernel+sync": time_calls(torch, lambda: tiny.add_(1), args.iters, args.warmup),
                "sync": time_calls(torch, lambda: None, args.iters, args.warmup),
            }

    if "aoti" in modes:
        workdir = args.workdir or os.path.dirname(os.path.abspath(args.json))
        os.makedirs(workdir, exist_ok=True)
        package = os.path.join(workdir, "mlp_aoti.pt2")
        comp, status = run_worker(args, "compile", package)
        if comp is None:
            res["latency_us"]["aoti"] = {str(b): status for b in batches}
        else:
            res["aoti_compile_s"] = comp.get("compile_s")
            run, status = run_worker(args, "run", package)
            if run is None:
                res["latency_us"]["aoti"] = {str(b): status for b in batches}
            else:
                res["latency_us"]["aoti"] = run["latency_us"]
                res["errors"]["aoti"] = run["errors"]
        if status != "ok":
            res["notes"].append("aoti: " + status)
        print("torch_ref.py: aoti: %s" % status, file=sys.stderr)

    tmp = args.json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
