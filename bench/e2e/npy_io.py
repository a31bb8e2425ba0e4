"""Plain-Python .npy and safetensors helpers for the end-to-end benchmark (no numpy, no torch).

.npy: version 1.0, little-endian '<f4' and '<f2', C order (what `tkexport run` reads and writes).
safetensors: an 8-byte little-endian header length, the JSON header, then the raw bytes.
"""

import ast
import json
import os
import struct

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


if __name__ == "__main__":
    import sys

    # npy_io.py make-inputs DIR 1,16,256,1024: DIR/x_b<B>.npy, float32 [B, 128], deterministic
    # npy_io.py package-weights PKG.tkpkg OUT.safetensors: the weights a package runs with
    if len(sys.argv) == 4 and sys.argv[1] == "make-inputs":
        for b in [int(v) for v in sys.argv[3].split(",") if v]:
            write_npy(os.path.join(sys.argv[2], "x_b%d.npy" % b), make_inputs(b), (b, 128))
    elif len(sys.argv) == 4 and sys.argv[1] == "package-weights":
        import zipfile

        with zipfile.ZipFile(sys.argv[2]) as z:
            data = z.read("weights.safetensors")
        with open(sys.argv[3] + ".tmp", "wb") as f:
            f.write(data)
        os.replace(sys.argv[3] + ".tmp", sys.argv[3])
    else:
        sys.exit("usage: npy_io.py make-inputs DIR BATCHES | npy_io.py package-weights PKG.tkpkg OUT.safetensors")
