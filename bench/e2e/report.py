#!/usr/bin/env python3
"""The end-to-end benchmark's table (bench/e2e/run.sh): combines OUTDIR/tkexport.tsv (tkexport
run --bench per batch), OUTDIR/build.tsv (export and compile times), OUTDIR/machine.txt and
OUTDIR/torch.json (torch_ref.py; optional) into OUTDIR/e2e.md, and prints it.

usage: report.py OUTDIR
"""

import argparse
import json
import os
import sys

COLUMNS = ["tkexport", "eager", "compile", "reduce-overhead", "aoti"]
TARGET = 1e-2


def read_tsv(path):
    """Rows of a tab-separated file with a header line, as dicts; [] when it is missing."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [dict(zip(lines[0], row)) for row in lines[1:]] if lines else []


def cell(v):
    if v is None:
        return "n/a"
    if isinstance(v, (int, float)):
        return "%.1f" % v
    try:
        return "%.1f" % float(v)
    except ValueError:
        return str(v)


def err_cell(e):
    if not e:
        return "n/a"
    verdict = "ok" if e["max_rel"] <= TARGET else "OVER %.0e" % TARGET
    return "%.1e %s (max abs %.1e; %d of %d past tol)" % (e["max_rel"], verdict, e["max_abs"], e["outside"], e["n"])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="report.py")
    ap.add_argument("outdir", help="the folder bench/e2e/run.sh wrote")
    out = ap.parse_args(argv).outdir
    if not os.path.isdir(out):
        ap.error("no folder '%s'" % out)
    tk = {row["batch"]: row for row in read_tsv(os.path.join(out, "tkexport.tsv"))}
    build = read_tsv(os.path.join(out, "build.tsv"))
    torch_res = {}
    tpath = os.path.join(out, "torch.json")
    if os.path.exists(tpath):
        with open(tpath) as f:
            torch_res = json.load(f)
    machine = ""
    if os.path.exists(os.path.join(out, "machine.txt")):
        with open(os.path.join(out, "machine.txt")) as f:
            machine = f.read().strip()

    batches = [int(b) for b in tk] or torch_res.get("batches", [])
    batches = sorted(set(batches) | set(torch_res.get("batches", [])))
    lat = torch_res.get("latency_us", {})
    errs = torch_res.get("errors", {})

    md = []
    md.append("# End-to-end latency: tkexport run vs PyTorch (examples/mlp, bf16)")
    md.append("")
    md.append("Linear(128, 64) -> SiLU -> Linear(64, 128) in bf16 with the same weights, per call: median host")
    md.append("round trip in microseconds (one call, then synchronize; inputs already on the GPU).")
    md.append("tkexport: `tkexport run --bench` (%s calls); PyTorch: torch_ref.py (%s calls after %s warm-up)." % (
        (next(iter(tk.values()))["calls"] if tk else "n/a"), torch_res.get("iters", "n/a"), torch_res.get("warmup", "n/a")))
    md.append("")
    if machine:
        md.append("```")
        md.append(machine)
        if torch_res:
            md.append("torch %s, triton %s, GPU %s" % (torch_res.get("torch"), torch_res.get("triton"), torch_res.get("device")))
        md.append("```")
        md.append("")
    md.append("| batch | " + " | ".join(COLUMNS) + " |")
    md.append("| ---: | " + " | ".join("---:" for _ in COLUMNS) + " |")
    for b in batches:
        row = [cell(tk.get(str(b), {}).get("median_us"))]
        for c in COLUMNS[1:]:
            row.append(cell(lat.get(c, {}).get(str(b))))
        md.append("| %d | %s |" % (b, " | ".join(row)))
    md.append("")
    floor = torch_res.get("floor_us")
    if floor:
        md.append("Floor (PyTorch): one tiny kernel + synchronize %.1f us; synchronize alone %.1f us." % (
            floor.get("kernel+sync", float("nan")), floor.get("sync", float("nan"))))
        md.append("")
    if tk:
        md.append("tkexport run --bench in detail (us):")
        md.append("")
        md.append("| batch | median | p10 | p90 | p99 | min | calls/s | samples/s |")
        md.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for b in batches:
            r = tk.get(str(b))
            if r:
                md.append("| %d | %s | %s | %s | %s | %s | %s | %s |" % (b, r["median_us"], r["p10_us"], r["p90_us"], r["p99_us"],
                                                                      r["min_us"], r["calls_s"], r["samples_s"]))
        md.append("")
    md.append("Agreement with eager PyTorch: max abs(difference) / max abs(eager), target <= %.0e; tol is" % TARGET)
    md.append("1e-2 + 1e-2 abs(eager) per element:")
    md.append("")
    md.append("| batch | tkexport | compile | reduce-overhead | aoti |")
    md.append("| ---: | --- | --- | --- | --- |")
    for b in batches:
        md.append("| %d | %s |" % (b, " | ".join(err_cell(errs.get(c, {}).get(str(b))) for c in
                                                   ["tkexport", "compile", "reduce-overhead", "aoti"])))
    md.append("")
    if build:
        md.append("Build: " + ", ".join("%s %s s" % (r["step"], r["seconds"]) for r in build)
                  + ("; AOTInductor compile %.1f s" % torch_res["aoti_compile_s"] if torch_res.get("aoti_compile_s") else "")
                  + ".")
        md.append("")
    for n in torch_res.get("notes", []):
        md.append("- note: %s" % n)
    if not torch_res:
        md.append("- note: no torch.json (torch_ref.py did not run or failed): PyTorch columns are n/a")
    text = "\n".join(md).rstrip() + "\n"
    tmp = os.path.join(out, "e2e.md.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(out, "e2e.md"))
    sys.stdout.write(text)
    bad = [b for b in batches if errs.get("tkexport", {}).get(str(b)) and errs["tkexport"][str(b)]["max_rel"] > TARGET]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
