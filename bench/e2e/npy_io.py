"""Plain-Python .npy and safetensors helpers for the end-to-end benchmark (no numpy, no torch).

.npy: version 1.0, little-endian '<f4' and '<f2', C order (what `tkexport run` reads and writes).
safetensors: an 8-byte little-endian header length, the JSON header, then the raw bytes.
"""

import argparse
import ast
import json
import os
import struct
import sys

MAGIC = b"\x93NUMPY"


def make_inputs(batch, features=128, seed=1):
    """Deterministic float32 values in [-1, 1) for a [batch, features] input (xorshift32)."""
    state = (0x9E3779B9 ^ (seed * 0x85EBCA6B) ^ (batch * 0xC2B2AE35)) & 0xFFFFFFFF or 1
    out = []
    for _ in range(batch * features):
        state ^= (state << 13) & 0xFFFFFFFF
        state ^= state >> 17
        state ^= (state << 5) & 0xFFFFFFFF
        out.append((state >> 8) / 8388608.0 - 1.0)  # 24 bits: exact in float32
    return out


def write_npy(path, values, shape, descr="<f4"):
    """values (a flat list of floats) as a C-order .npy of that shape, like np.save writes it."""
    fmt = {"<f4": "f", "<f2": "e"}[descr]
    shape_text = "(%s)" % (", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    total = (10 + len(header) + 1 + 63) // 64 * 64
    header = header + " " * (total - 10 - len(header) - 1) + "\n"
    data = struct.pack("<%d%s" % (len(values), fmt), *values)
    with open(path + ".tmp", "wb") as f:
        f.write(MAGIC + bytes([1, 0]) + struct.pack("<H", len(header)) + header.encode("latin1") + data)
    os.replace(path + ".tmp", path)


def read_npy(path):
    """(flat list of floats, shape, descr) of a .npy of '<f4' or '<f2' in C order."""
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:6] != MAGIC:
        raise ValueError("%s: not a .npy file" % path)
    major = blob[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", blob[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", blob[8:12])
        start = 12
    header = ast.literal_eval(blob[start : start + hlen].decode("latin1"))
    if header["fortran_order"]:
        raise ValueError("%s: fortran_order" % path)
    descr, shape = header["descr"], tuple(header["shape"])
    fmt = {"<f4": ("f", 4), "<f2": ("e", 2)}.get(descr)
    if not fmt:
        raise ValueError("%s: dtype %s (expected <f4 or <f2)" % (path, descr))
    n = 1
    for d in shape:
        n *= d
    data = blob[start + hlen :]
    if len(data) != n * fmt[1]:
        raise ValueError("%s: %d data bytes, shape %s needs %d" % (path, len(data), shape, n * fmt[1]))
    return list(struct.unpack("<%d%s" % (n, fmt[0]), data)), shape, descr


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} of a .safetensors file, parsed by hand."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > 100 << 20 or 8 + hlen > len(blob):
        raise ValueError("%s: bad safetensors header length %d" % (path, hlen))
    header = json.loads(blob[8 : 8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        out[name] = (e["dtype"], tuple(e["shape"]), blob[base + begin : base + end])
    return out


def batch_list(text):
    """'1,16,256': the batches, each a whole number in [1, 1024] (the mlp's range)."""
    try:
        batches = [int(v) for v in text.split(",") if v]
    except ValueError:
        batches = []
    if not batches or any(b < 1 or b > 1024 for b in batches):
        raise argparse.ArgumentTypeError("expected batches in [1, 1024] joined by ',', not '%s'" % text)
    return batches


if __name__ == "__main__":
    import zipfile

    ap = argparse.ArgumentParser(prog="npy_io.py", description="The end-to-end benchmark's inputs and weights.")
    cmds = ap.add_subparsers(dest="cmd", required=True)
    mk = cmds.add_parser("make-inputs", help="DIR/x_b<B>.npy, float32 [B, 128], deterministic, for each batch")
    mk.add_argument("dir")
    mk.add_argument("batches", type=batch_list, help="e.g. 1,16,256,1024")
    pw = cmds.add_parser("package-weights", help="the weights a package runs with, as a safetensors file")
    pw.add_argument("package", help="PKG.tkpkg")
    pw.add_argument("output", help="OUT.safetensors")
    args = ap.parse_args()
    if args.cmd == "make-inputs":
        if not os.path.isdir(args.dir):
            ap.error("no folder '%s'" % args.dir)
        for b in args.batches:
            write_npy(os.path.join(args.dir, "x_b%d.npy" % b), make_inputs(b), (b, 128))
    else:
        try:
            with zipfile.ZipFile(args.package) as z:
                data = z.read("weights.safetensors")
        except (OSError, KeyError, zipfile.BadZipFile) as e:
            sys.exit("npy_io.py: cannot read the weights of '%s': %s" % (args.package, e))
        with open(args.output + ".tmp", "wb") as f:
            f.write(data)
        os.replace(args.output + ".tmp", args.output)
