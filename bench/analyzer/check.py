#!/usr/bin/env python3
"""Compares `tkexport analyze --format json` output with gen.py's expected.json.

  check.py EXPECTED ANALYSIS [--same-as OTHER] [--strict]

Prints how many ops were found and how many kernel sets equal the expected ones (direct
launches, and the closure over tk_call), the unresolved entries and diagnostics, and with
--same-as whether OTHER (another run, e.g. with -p) has the same op map. With --strict it exits
1 unless every expected op is found with exactly its kernels (closure), nothing is unresolved,
there is no diagnostic and the maps are the same. The one comparison run.sh and the
analyzer_corpus test use."""

import argparse
import json
import sys


def op_map(doc):
    return {o["name"]: sorted(k["name"] for k in o.get("kernels", [])) for o in doc.get("ops", [])}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("expected")
    ap.add_argument("analysis")
    ap.add_argument("--same-as", metavar="OTHER")
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args(argv)
    exp = json.load(open(a.expected))
    got = json.load(open(a.analysis))
    want = {o["op"]: set(o["kernels"]) for o in exp["ops"]}
    calls = {o["op"]: set(o["calls"]) for o in exp["ops"]}

    def closure(op, seen=()):
        ks = set(want.get(op, ()))
        for c in calls.get(op, ()):
            if c not in seen:
                ks |= closure(c, seen + (op,))
        return ks

    found = {k: set(v) for k, v in op_map(got).items()}
    direct = sum(found.get(o) == want[o] for o in want)
    trans = sum(found.get(o) == closure(o) for o in want)
    unresolved = sum(len(o.get("unresolved", [])) for o in got.get("ops", []))
    diags = got.get("diagnostics", [])
    print("ops found %d/%d; kernel sets equal to the expected ones: %d (direct launches), %d (with tk_call closure); "
          "%d unresolved, %d diagnostics" % (len(set(found) & set(want)), len(want), direct, trans, unresolved, len(diags)))
    bad = [o for o in sorted(want) if found.get(o) != closure(o)]
    for o in bad[:10]:
        print("  %s: got %s, expected %s" % (o, sorted(found.get(o, ())), sorted(closure(o))))
    for d in diags[:10]:
        print("  %s:%s:%s: %s [%s]" % (d.get("file"), d.get("line"), d.get("column"), d.get("message"), d.get("rule")))
    same = True
    if a.same_as:
        other = op_map(json.load(open(a.same_as)))
        same = other == op_map(got)
        print("op map %s %s" % ("identical to" if same else "DIFFERS from", a.same_as))
        if not same:
            for o in sorted(set(other) | set(op_map(got))):
                if other.get(o) != op_map(got).get(o):
                    print("  %s: %s vs %s" % (o, op_map(got).get(o), other.get(o)))
    ok = not bad and not unresolved and not diags and same
    return 0 if ok or not a.strict else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
