#!/usr/bin/env python3
"""The serving benchmark's report: report.py OUTDIR prints the tables and writes OUTDIR/serving.md
from what run.sh left there (serving_<m>.json, first_exact_<m>.json, torch_<m>.json,
round_<m>_<r>.json, seed_<m>_<s>.json, open_big*.json, build.tsv, machine.txt). A missing file
leaves its cells "n/a"."""

import argparse
import json
import os
import sys

MODELS = ["mlp", "tokmlp"]
TORCH_MODES = ["eager", "compile", "reduce-overhead"]


def load(out, name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def us(v):
    return "n/a" if v is None else "%.1f" % v


def get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" ---: " if i else " --- " for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def torch_run(t, mode, stream):
    for r in (t or {}).get("runs", []):
        if r.get("mode") == mode and r.get("stream") == stream:
            return r
    return None


def median(v):
    v = sorted(v)
    n = len(v)
    return None if not n else v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def numbered(out, prefix):
    """{n: json} of OUTDIR/<prefix><n>.json, n = 1, 2, ... while they exist"""
    found, n = {}, 1
    while True:
        d = load(out, "%s%d.json" % (prefix, n))
        if d is None:
            return found
        found[n] = d
        n += 1


def rounds_section(out, m):
    """the goals' figures over repeated runs (run.sh's step f): 4 threads' calls/s over one thread's
    at the fixed batch, round by round, and the first calls' percentiles and the uniform stream's
    mean seed by seed"""
    md = []
    ratios, busy_ratios, rows = [], [], []

    def ratio_of(one, four):
        return four / one if one and four else None

    def times(v):
        return "%.2fx" % v if v is not None else "n/a"

    def rate(v):
        return "%.0f" % v if v else "n/a"

    for r, d in sorted(numbered(out, "round_%s_" % m).items()):
        by = {run["threads"]: run for run in d.get("runs", []) if run.get("stream") == "fixed"}
        one, four = get(by.get(1), "calls_per_s"), get(by.get(4), "calls_per_s")
        busy1, busy4 = get(by.get(1), "busy_calls_per_s"), get(by.get(4), "busy_calls_per_s")
        ratio, busy = ratio_of(one, four), ratio_of(busy1, busy4)
        if ratio is not None:
            ratios.append(ratio)
        if busy is not None:
            busy_ratios.append(busy)
        rows.append([r, rate(one), rate(four), times(ratio), rate(busy1), rate(busy4), times(busy),
                     us(get(by.get(1), "stats", "median_us")), us(get(by.get(4), "stats", "median_us"))])
    if rows:
        md += ["Rounds of 1 and 4 threads at the fixed batch (%d; median ratio %s, at least 3.5x in %d; while every "
               "thread ran: median %s, at least 3.5x in %d):" % (
                   len(rows), times(median(ratios)), sum(v >= 3.5 for v in ratios), times(median(busy_ratios)),
                   sum(v >= 3.5 for v in busy_ratios)), "",
               table(["round", "1 thread calls/s", "4 threads calls/s", "ratio", "1 thread, all busy",
                      "4 threads, all busy", "ratio", "1 thread median", "4 threads median"], rows), ""]
    p99s, means, rows = [], [], []
    for seed, d in sorted(numbered(out, "seed_%s_" % m).items()):
        f = get(d, "first_calls") or {}
        u = next((run for run in d.get("runs", []) if run.get("stream") == "uniform" and run.get("threads") == 1), None)
        p99, mean = get(f, "first", "p99_us"), get(u, "stats", "mean_us")
        if p99 is not None:
            p99s.append(p99)
        if mean is not None:
            means.append(mean)
        rows.append([seed, f.get("shapes", "n/a"), us(get(f, "first", "median_us")), us(p99), us(get(f, "first", "max_us")),
                     us(get(f, "second", "median_us")), us(get(f, "second", "p99_us")), us(get(f, "excess", "median_us")),
                     us(mean), us(get(u, "stats", "p99_us"))])
    if rows:
        md += ["Seed by seed, bound and prefilled over the whole space (on a GPU): first calls of new shapes, and the "
               "uniform stream on one thread (%d seeds; first calls: median p99 %s, at most 30 us in %d; uniform: median "
               "mean %s, at most 20 us in %d):" % (len(rows), us(median(p99s)), sum(v <= 30.0 for v in p99s),
                                                   us(median(means)), sum(v <= 20.0 for v in means)), "",
               table(["seed", "new shapes", "first-call median", "p99", "max", "second-call median", "p99",
                      "first - second median", "uniform mean", "p99"], rows), ""]
    return md


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, prog="report.py")
    ap.add_argument("outdir", help="the folder bench/serving/run.sh wrote")
    out = ap.parse_args(argv).outdir
    if not os.path.isdir(out):
        ap.error("no folder '%s'" % out)
    md = ["# Serving benchmark", ""]
    try:
        with open(os.path.join(out, "machine.txt")) as f:
            md += ["```", f.read().strip(), "```", ""]
    except OSError:
        pass
    for m in MODELS:
        s, t, ex = load(out, "serving_%s.json" % m), load(out, "torch_%s.json" % m), load(out, "first_exact_%s.json" % m)
        extra = rounds_section(out, m)
        if not s and not t:
            if extra:
                md += ["## %s" % m, ""] + extra
            continue
        md += ["## %s (%s)" % (m, (s or t or {}).get("symbols", "?")), ""]
        # one thread: tkexport against each PyTorch mode, per stream
        head = ["stream (1 thread)", "tkexport median", "p99", "mean"]
        for mode in TORCH_MODES:
            head += ["%s median" % mode, "p99", "mean"]
        rows = []
        for stream in ["fixed", "cycle", "uniform"]:
            r = next((x for x in (s or {}).get("runs", []) if x["stream"] == stream and x["threads"] == 1), None)
            row = [stream, us(get(r, "stats", "median_us")), us(get(r, "stats", "p99_us")), us(get(r, "stats", "mean_us"))]
            for mode in TORCH_MODES:
                tr = torch_run(t, mode, stream)
                if tr and "failed" in tr:
                    row += ["failed", "", ""]
                else:
                    row += [us(get(tr, "stats", "median_us")), us(get(tr, "stats", "p99_us")), us(get(tr, "stats", "mean_us"))]
            rows.append(row)
        md += ["Microseconds per call (run + synchronize, inputs on the device); fixed = %s." % (s or t or {}).get("fixed", "?"),
               "", table(head, rows), ""]
        # threads
        if s and s.get("runs"):
            rows = [[r["stream"], r["threads"], us(get(r, "stats", "median_us")), us(get(r, "stats", "p90_us")),
                     us(get(r, "stats", "p99_us")), us(get(r, "stats", "mean_us")), "%.0f" % r["calls_per_s"],
                     r["new_shape_calls"], us(r.get("new_median_us") if r["new_shape_calls"] else None),
                     us(r.get("repeat_median_us") if r["new_shape_calls"] < get(r, "stats", "n") else None),
                     us(get(r, "host", "mean_us")), "%.0f" % r["busy_calls_per_s"] if "busy_calls_per_s" in r else "n/a"]
                    for r in s["runs"]]
            md += ["tkexport, each thread its own session (calls/s: all threads' calls over the wall time; host mean: "
                   "the host's part of a call, until the run returned, where the benchmark reports it; all busy: the "
                   "calls/s while every thread was running):", "",
                   table(["stream", "threads", "median", "p90", "p99", "mean", "calls/s", "new-shape calls",
                          "new median", "repeat median", "host mean", "all busy"], rows), ""]
        # first calls
        rows = []
        for label, d in [("tkexport", get(s, "first_calls")), ("tkexport, TK_CUBLASLT_EXACT=1", get(ex, "first_calls"))] + [
                ("torch " + mode, get(t, "first_calls", mode)) for mode in TORCH_MODES]:
            if isinstance(d, str):
                rows.append([label, d, "", "", "", "", "", "", "", "", "", ""])
            elif d:
                rows.append([label, us(d.get("session_first_call_us")), d.get("shapes"), us(get(d, "first", "median_us")),
                             us(get(d, "first", "p99_us")), us(get(d, "first", "max_us")), us(get(d, "second", "median_us")),
                             us(get(d, "second", "p99_us")), us(get(d, "first_host", "p99_us")),
                             us(get(d, "second_host", "p99_us")), us(get(d, "excess", "median_us")),
                             us(get(d, "excess", "p99_us"))])
        if rows:
            md += ["First calls: a fresh session (or a fresh torch.compile), its very first call, then new shapes each run "
                   "once and again; the host's part of the first and second calls (until the run returned, the wait for the GPU "
                   "apart) and each shape's first call less its second where the benchmark reports them:", "",
                   table(["", "very first call", "new shapes", "first-call median", "p99", "max", "second-call median",
                          "p99", "first-call host p99", "second-call host p99", "first - second median", "p99"], rows),
                   ""]
        md += extra
    o1, o2 = load(out, "open_big.json"), load(out, "open_big_again.json")
    if o1:
        cache = "?"
        try:
            with open(os.path.join(out, "open_big.txt")) as f:
                cache = f.readline().strip().split(": ")[-1]
        except OSError:
            pass
        gib = o1["package_bytes"] / float(1 << 30)
        rows = []
        for label, o in [("first (page cache %s)" % cache, o1), ("again (cached)", o2)]:
            if o:
                rows.append([label, "%.2f" % gib, "%.1f" % o["open_ms"], "%.1f" % o["session_new_ms"],
                             "%.2f" % (o["mem_end"]["vm_hwm_kb"] / 1048576.0),
                             "%.2f" % (o["mem_end"]["rss_anon_kb"] / 1048576.0), "%.2f" % o["peak_over_package"]])
        md += ["## Large weights", "", table(["open", "package GiB", "tk_package_open ms", "tk_session_new ms",
                                              "peak RSS GiB", "anon GiB", "peak / package"], rows), ""]
    try:
        with open(os.path.join(out, "build.tsv")) as f:
            md += ["Build steps (s): " + ", ".join(" ".join(line.strip().split("\t")) for line in f.readlines()[1:]), ""]
    except OSError:
        pass
    text = "\n".join(md)
    with open(os.path.join(out, "serving.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
