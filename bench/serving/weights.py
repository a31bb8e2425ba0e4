#!/usr/bin/env python3
"""Weights and packages for bench/serving, in plain Python (no numpy, no torch).

  weights.py tokmlp OUT.safetensors
      the residual token MLP's parameters (bench/serving/tokmlp/model.c), deterministic, in
      nn.Linear's initialization range, under PyTorch's state_dict names
  weights.py bigprog --gib G OUT.tkprog
      a .tkprog of one tk::linear whose weight holds about G GiB (bf16 [N, 128], N = G GiB / 256
      bytes), for the open and upload benchmark (bench_open): program.json written from
      docs/formats/tkprog.md and weights.safetensors streamed in 1 MiB blocks (zip64 past 4 GiB),
      so no step holds the weights in memory; `tkexport compile` makes the package. The GPU
      machine builds without the analyzer, so `tkexport export` is not there to do it.
"""

import argparse
import json
import math
import os
import struct
import sys
import zipfile


def bf16_bits(f):
    """float -> bf16 bits, round to nearest even (as tk/half.h does)."""
    (u,) = struct.unpack("<I", struct.pack("<f", f))
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


class XorShift32:
    """The same numbers on every machine."""

    def __init__(self, seed):
        self.s = seed & 0xFFFFFFFF or 1

    def uniform(self, lo, hi):
        s = self.s
        s ^= (s << 13) & 0xFFFFFFFF
        s ^= s >> 17
        s ^= (s << 5) & 0xFFFFFFFF
        self.s = s
        return lo + (hi - lo) * (s >> 8) / 16777216.0


def header_bytes(tensors):
    """The safetensors header for {name: (dtype, shape, nbytes)}: keys sorted, data packed by
    name (every tensor here is 2-byte bf16, so the runtime's order is by name), the JSON padded
    with spaces to a multiple of 8 (with its 8-byte length)."""
    header, offset = {}, 0
    for name in sorted(tensors):
        dtype, shape, nbytes = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text


def tokmlp(out):
    """linear1 128 -> 512, linear2 512 -> 128, uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    shapes = {"linear1.weight": (512, 128), "linear1.bias": (512,), "linear2.weight": (128, 512), "linear2.bias": (128,)}
    fan_in = {"linear1": 128, "linear2": 512}
    rng = XorShift32(0x7041C0DE)
    data = {}
    for name in ["linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]:
        bound = 1.0 / math.sqrt(fan_in[name.split(".")[0]])
        n = math.prod(shapes[name])
        data[name] = struct.pack("<%dH" % n, *(bf16_bits(rng.uniform(-bound, bound)) for _ in range(n)))
    tensors = {k: ("BF16", shapes[k], len(v)) for k, v in data.items()}
    with open(out + ".tmp", "wb") as f:
        f.write(header_bytes(tensors))
        for name in sorted(data):
            f.write(data[name])
    os.replace(out + ".tmp", out)


def program_json(n, batch_max):
    """bigw: y = linear(x, big.weight, big.bias), x bf16[batch, 128], weight [n, 128]."""
    linear = {"name": "tk::linear", "schema": "(Tensor x, Tensor weight, Tensor bias) -> Tensor", "function": None,
              "file": "<builtin>", "builtin": True, "kernels": []}
    y = {"id": 3, "dtype": "bf16", "shape": ["batch", n]}
    return {
        "format": "tkprog", "version": 1, "program": "bigw",
        "symbols": [{"name": "batch", "min": 1, "max": batch_max}],
        "inputs": [{"name": "x", "id": 0, "dtype": "bf16", "shape": ["batch", 128]}],
        "outputs": [y],
        "parameters": [{"name": "big.weight", "id": 1, "dtype": "bf16", "shape": [n, 128]},
                       {"name": "big.bias", "id": 2, "dtype": "bf16", "shape": [n]}],
        "nodes": [{"op": "tk::linear", "inputs": [0, 1, 2], "outputs": [y], "attrs": {},
                   "source": {"file": "bench/serving/weights.py", "line": 1}}],
        "guards": [], "notes": [], "ops": [linear], "sources": [],
    }


def bigprog(out, gib, batch_max=16):
    n = max(1, int(gib * (1 << 30)) // 256)
    tensors = {"big.weight": ("BF16", (n, 128), n * 256), "big.bias": ("BF16", (n,), n * 2)}
    # one 1 MiB block of small values (so that a run gives finite outputs), repeated
    rng = XorShift32(0xB16)
    block = struct.pack("<%dH" % (1 << 19), *(bf16_bits(rng.uniform(-0.08, 0.08)) for _ in range(1 << 19)))

    def stream(f, nbytes):
        while nbytes > 0:
            k = min(nbytes, len(block))
            f.write(block[:k])
            nbytes -= k

    tmp = out + ".tmp"
    with zipfile.ZipFile(tmp, "w", allowZip64=True) as z:
        z.writestr(zipfile.ZipInfo("program.json", (1980, 1, 1, 0, 0, 0)),
                   json.dumps(program_json(n, batch_max), indent=1), compress_type=zipfile.ZIP_DEFLATED)
        info = zipfile.ZipInfo("weights.safetensors", (1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_STORED
        with z.open(info, "w", force_zip64=True) as f:
            f.write(header_bytes(tensors))
            for name in sorted(tensors):  # big.bias, then big.weight
                stream(f, tensors[name][2])
    os.replace(tmp, out)
    print("weights.py: %s: bigw, weight bf16[%d, 128] (%.2f GiB)" % (out, n, n * 258 / (1 << 30)), file=sys.stderr)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("tokmlp", help="the token MLP's weights")
    t.add_argument("out")
    b = sub.add_parser("bigprog", help="a .tkprog with about --gib GiB of weights")
    b.add_argument("--gib", type=float, default=8.0, help="weights in GiB (default 8)")
    b.add_argument("--batch-max", type=int, default=16, help="the input's batch range is [1, this] (default 16)")
    b.add_argument("out")
    a = p.parse_args(argv)
    if a.what == "tokmlp":
        tokmlp(a.out)
    else:
        bigprog(a.out, a.gib, a.batch_max)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
