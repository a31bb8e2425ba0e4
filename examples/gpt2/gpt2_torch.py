"""GPT-2 in PyTorch on the same weights as examples/gpt2 (the safetensors example_gpt2 writes, read
here without the safetensors package), for the comparison in README.md:

  python3 gpt2_torch.py inputs BATCH SEQ DIR            ids.npy, pos.npy (tokens of a fixed seed; 0..SEQ-1)
  python3 gpt2_torch.py check WEIGHTS DIR OUT.npy       tkexport's logits (OUT.npy, float32) against
                                                        PyTorch's in bf16 and an f32 reference
  python3 gpt2_torch.py bench WEIGHTS B,S [B,S ...]     eager and torch.compile, median us a call
  python3 gpt2_torch.py profile WEIGHTS B,S             torch.compile's logits strides and top kernels

The model is written as Hugging Face's GPT2LMHeadModel computes it (Conv1D as x @ W + b,
F.scaled_dot_product_attention causal, GELU tanh, tied LM head), in the weights' dtype on cuda.
"""
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

# the timing loop bench/kernels' PyTorch scripts share
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "kernels"))
from torch_timing import median_us  # noqa: E402

LAYERS, HEADS = 12, 12


def read_safetensors(path, device):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dtypes[e["dtype"]]).reshape(e["shape"])
        out[name] = t.to(device)
    return out


def write_npy(path, values, shape):
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{len(values)}q", *values))


def read_npy(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:6] == b"\x93NUMPY", path
    major = raw[6]
    hl = struct.unpack("<H" if major == 1 else "<I", raw[8:10] if major == 1 else raw[8:12])[0]
    start = (10 if major == 1 else 12) + hl
    header = raw[(10 if major == 1 else 12):start].decode()
    shape = tuple(int(x) for x in header.split("'shape': (")[1].split(")")[0].split(",") if x.strip())
    dt = torch.float32 if "<f4" in header else torch.int64
    return torch.frombuffer(bytearray(raw[start:]), dtype=dt).reshape(shape)


def forward(w, ids, pos):
    h = w["wte.weight"][ids] + w["wpe.weight"][pos]
    B, S, E = h.shape
    D = E // HEADS
    for l in range(LAYERS):
        p = f"h.{l}."
        a = F.layer_norm(h, (E,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = torch.addmm(w[p + "attn.c_attn.bias"], a.view(-1, E), w[p + "attn.c_attn.weight"]).view(B, S, 3 * E)
        q, k, v = (t.view(B, S, HEADS, D).transpose(1, 2) for t in qkv.split(E, dim=2))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B * S, E)
        h = h + torch.addmm(w[p + "attn.c_proj.bias"], o, w[p + "attn.c_proj.weight"]).view(B, S, E)
        m = F.layer_norm(h, (E,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        f = F.gelu(torch.addmm(w[p + "mlp.c_fc.bias"], m.view(-1, E), w[p + "mlp.c_fc.weight"]), approximate="tanh")
        h = h + torch.addmm(w[p + "mlp.c_proj.bias"], f, w[p + "mlp.c_proj.weight"]).view(B, S, E)
    h = F.layer_norm(h, (E,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    return h @ w["wte.weight"].t()


def main():
    a = sys.argv[1:]
    if len(a) == 4 and a[0] == "inputs":
        B, S, d = int(a[1]), int(a[2]), a[3]
        g = torch.Generator().manual_seed(1234)
        ids = torch.randint(0, 50257, (B, S), generator=g)
        write_npy(f"{d}/ids.npy", ids.flatten().tolist(), (B, S))
        write_npy(f"{d}/pos.npy", [s for _ in range(B) for s in range(S)], (B, S))
    elif len(a) == 4 and a[0] == "check":
        w = read_safetensors(a[1], "cuda")
        ids, pos = read_npy(f"{a[2]}/ids.npy").cuda(), read_npy(f"{a[2]}/pos.npy").cuda()
        ours = read_npy(a[3]).cuda()
        with torch.no_grad():
            pt = forward(w, ids, pos).float()
            ref = forward({k: v.float() for k, v in w.items()}, ids, pos)
        scale = ref.abs().max().item()
        e_ours, e_pt = (ours - ref).abs(), (pt - ref).abs()
        agree = (ours.argmax(-1) == pt.argmax(-1)).float().mean().item()
        print(f"logits {tuple(ours.shape)}, max |ref| {scale:.4f}")
        print(f"tkexport bf16 vs f32 reference: max abs {e_ours.max().item():.4f}, mean abs {e_ours.mean().item():.5f}")
        print(f"PyTorch  bf16 vs f32 reference: max abs {e_pt.max().item():.4f}, mean abs {e_pt.mean().item():.5f}")
        print(f"tkexport vs PyTorch bf16: max abs {(ours - pt).abs().max().item():.4f}; same argmax at {agree:.4f} "
              "of positions")
        ok = e_ours.max().item() <= 2 * e_pt.max().item() + 1e-3 and e_ours.mean().item() <= 2 * e_pt.mean().item() + 1e-4
        print("within bf16 tolerance (at most twice PyTorch bf16's own error against f32):", "yes" if ok else "NO")
        sys.exit(0 if ok else 1)
    elif len(a) >= 3 and a[0] == "bench":
        w = read_safetensors(a[1], "cuda")
        compiled = torch.compile(forward)
        print("| batch | seq | eager us | torch.compile us |\n| --- | --- | --- | --- |")
        for bs in a[2:]:
            B, S = (int(x) for x in bs.split(","))
            ids = torch.randint(0, 50257, (B, S), device="cuda")
            pos = torch.arange(S, device="cuda").expand(B, S).contiguous()
            runs, reps = (20, 10) if B * S <= 1024 else (10, 3)
            with torch.no_grad():
                e = median_us(lambda: forward(w, ids, pos), runs, reps)
                c = median_us(lambda: compiled(w, ids, pos), runs, reps)
            print(f"| {B} | {S} | {e:.1f} | {c:.1f} |", flush=True)
    elif len(a) == 3 and a[0] == "profile":
        w = read_safetensors(a[1], "cuda")
        B, S = (int(x) for x in a[2].split(","))
        ids = torch.randint(0, 50257, (B, S), device="cuda")
        pos = torch.arange(S, device="cuda").expand(B, S).contiguous()
        compiled = torch.compile(forward)
        with torch.no_grad():
            for _ in range(3):
                out = compiled(w, ids, pos)
            torch.cuda.synchronize()
            print(f"torch.compile logits {tuple(out.shape)}, strides {out.stride()}, contiguous {out.is_contiguous()}")
            from torch.profiler import profile, ProfilerActivity
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    compiled(w, ids, pos)
                torch.cuda.synchronize()
        print("five calls:")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=70))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
