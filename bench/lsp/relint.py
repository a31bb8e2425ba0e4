#!/usr/bin/env python3
"""Re-lint latency of `tkexport lsp`: bench/lsp/relint.py [--build BUILD_DIR] [--reps N]

Generates a workspace with bench/analyzer/gen.py (180 op files + 20 kernel files by default),
warms the summary cache with one `tkexport analyze`, then drives `tkexport lsp -v` as an editor
would: initialize, open one op file, and REPS times send a didChange that edits it (a new
declaration appended, different each time, so the file really is re-parsed) and time until the
server publishes that file's diagnostics. Runs once without debounce (--debounce 0: the pure
re-lint) and once with the default 150 ms debounce, and also times the parts:

  save  : didSave with nothing changed: every file from the cache, then link and resolve;
  parse : `tkexport analyze --no-cache FILE` on the edited file alone (one libclang parse);
  server: the "analysis" time the server logs for each lint (-v), without the protocol.

Edits alternate between a valid declaration and one with a syntax error, and each publication
is checked to carry 0 or 1 diagnostic accordingly, so a stale publication is never timed.

With --profile DIR the no-debounce server runs under `perf record` and its samples are sorted
into the analyzer's phases (CPU milliseconds per lint, main thread and workers apart).

Prints a plain table, then markdown for bench/lsp/RESULTS.md.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


class Server:
    """A tkexport lsp process and the two streams we read: messages and its -v log lines."""

    def __init__(self, tk, root, debounce, env, wrap):
        self.p = subprocess.Popen(wrap + [tk, "lsp", "-v", "--debounce", str(debounce)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.logs = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.next_id = 1
        self.send({"id": self._id(), "method": "initialize",
                   "params": {"processId": os.getpid(), "rootUri": uri_of(root), "capabilities": {}}})
        self.wait_reply()
        self.send({"method": "initialized", "params": {}})

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def _read_stderr(self):
        for line in self.p.stderr:
            line = line.decode(errors="replace").rstrip("\n")
            with self.cv:
                self.logs.append(line)
                self.cv.notify_all()

    def wait_log(self, n, timeout=600):
        """Waits until the server has logged n lint lines; returns them."""
        with self.cv:
            ok = self.cv.wait_for(lambda: len([l for l in self.logs if " lint: " in l]) >= n, timeout)
            if not ok:
                sys.exit("relint.py: the server logged no lint line in %d s; its log:\n%s" % (timeout, "\n".join(self.logs)))
            return [l for l in self.logs if " lint: " in l]

    def send(self, msg):
        msg["jsonrpc"] = "2.0"
        body = json.dumps(msg).encode()
        self.p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.p.stdin.flush()

    def recv(self):
        length = None
        while True:
            line = self.p.stdout.readline()
            if not line:
                sys.exit("relint.py: the server closed its output; its log:\n" + "\n".join(self.logs))
            line = line.strip()
            if not line:
                break
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        return json.loads(self.p.stdout.read(length))

    def wait_reply(self):
        while True:
            m = self.recv()
            if "id" in m and "method" not in m:
                return m

    def wait_publish(self, uri):
        while True:
            m = self.recv()
            if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri:
                return m["params"]["diagnostics"]

    def close(self):
        self.send({"id": self._id(), "method": "shutdown"})
        self.wait_reply()
        self.send({"method": "exit"})
        self.p.stdin.close()
        rc = self.p.wait(60)
        if rc != 0:
            sys.exit("relint.py: the server exited with %d after shutdown/exit" % rc)


def uri_of(path):
    return "file://" + urllib.parse.quote(path)


def analysis_ms(line):
    # "tkexport lsp: lint: 200 files (1 parsed, 199 cached), ... analysis 61.2 ms, publishing ..."
    return float(line.split(" analysis ")[1].split(" ms")[0])


def parsed_count(line):
    return int(line.split("(")[1].split(" parsed")[0])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def run_session(tk, tree, target, debounce, reps, env, wrap=()):
    """Returns (edit latencies, edit server times, save latencies, save server times) in ms."""
    s = Server(tk, tree, debounce, env, list(wrap))
    s.wait_log(1)  # the lint that follows 'initialized'
    path = os.path.join(tree, target)
    uri = uri_of(path)
    text = open(path).read()
    s.send({"method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "c", "version": 1, "text": text}}})
    s.wait_publish(uri)
    nlint = len(s.wait_log(2))
    edit, edit_srv, save, save_srv = [], [], [], []
    stamp = "%d_%d" % (os.getpid(), debounce)
    for r in range(reps):
        broken = r % 2 == 1
        new = text + "\nstatic const int tk_relint_bench_%s_%d = %s;\n" % (stamp, r, "" if broken else str(r))
        t0 = time.perf_counter()
        s.send({"method": "textDocument/didChange",
                "params": {"textDocument": {"uri": uri, "version": 2 + r}, "contentChanges": [{"text": new}]}})
        diags = s.wait_publish(uri)
        edit.append((time.perf_counter() - t0) * 1e3)
        if len(diags) != int(broken):
            sys.exit("relint.py: edit %d published %d diagnostics, expected %d" % (r, len(diags), int(broken)))
        nlint += 1
        line = s.wait_log(nlint)[-1]
        if parsed_count(line) != 1:
            sys.exit("relint.py: expected exactly one file parsed after an edit, the server says: " + line)
        edit_srv.append(analysis_ms(line))

        t0 = time.perf_counter()
        s.send({"method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}})
        if len(s.wait_publish(uri)) != int(broken):
            sys.exit("relint.py: a save changed the diagnostics of an unchanged buffer")
        save.append((time.perf_counter() - t0) * 1e3)
        nlint += 1
        line = s.wait_log(nlint)[-1]
        if parsed_count(line) != 0:
            sys.exit("relint.py: expected no file parsed after a save without change, the server says: " + line)
        save_srv.append(analysis_ms(line))
    s.close()
    print("relint.py: debounce %d ms, last lint: %s" % (debounce, line.split("lint: ", 1)[1]), file=sys.stderr)
    return edit, edit_srv, save, save_srv


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="build folder holding tkexport")
    ap.add_argument("--reps", type=int, default=15, help="edits timed per session (default 15)")
    ap.add_argument("--ops", type=int, default=180)
    ap.add_argument("--kernels", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", default="ops/op_090.c", help="the op file edited (relative to the workspace)")
    ap.add_argument("--keep", action="store_true", help="keep the generated workspace and cache")
    ap.add_argument("--profile", metavar="DIR", help="run the no-debounce server under perf record, data in DIR")
    a = ap.parse_args()
    tk = os.path.join(os.path.abspath(a.build), "tkexport")
    if not os.access(tk, os.X_OK):
        sys.exit("relint.py: %s not found (cmake -S . -B build && cmake --build build)" % tk)

    work = tempfile.mkdtemp(prefix="tklsp.")
    try:
        tree = os.path.join(work, "ws")
        subprocess.run([sys.executable, os.path.join(REPO, "bench/analyzer/gen.py"), tree, "--ops", str(a.ops),
                        "--kernels", str(a.kernels), "--seed", str(a.seed)], check=True, stdout=subprocess.DEVNULL)
        tree = os.path.realpath(tree)
        nfiles = sum(1 for d in ("ops", "kernels") for f in os.listdir(os.path.join(tree, d)))
        if not os.path.exists(os.path.join(tree, a.target)):
            sys.exit("relint.py: %s is not in the generated workspace" % a.target)
        env = dict(os.environ, TKEXPORT_CACHE_DIR=os.path.join(work, "cache"))

        t0 = time.perf_counter()
        subprocess.run([tk, "analyze", "."], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
        cold = time.perf_counter() - t0
        print("relint.py: %d files; cache warmed by 'tkexport analyze' in %.2f s" % (nfiles, cold), file=sys.stderr)

        parse = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            subprocess.run([tk, "analyze", "--no-cache", a.target], cwd=tree, env=env, check=True,
                           stdout=subprocess.DEVNULL)
            parse.append((time.perf_counter() - t0) * 1e3)

        res = {}
        for debounce in (0, 150):
            wrap = ()
            if a.profile and debounce == 0:
                os.makedirs(a.profile, exist_ok=True)
                perf_data = os.path.join(os.path.abspath(a.profile), "lsp.perf")
                wrap = ("perf", "record", "-q", "-F", str(PERF_HZ), "--call-graph", "dwarf,16384", "-o", perf_data, "--")
            res[debounce] = run_session(tk, tree, a.target, debounce, a.reps, env, wrap)
            print("relint.py: debounce %d ms: edit->publish median %.1f ms" % (debounce, med(res[debounce][0])),
                  file=sys.stderr)
    finally:
        if a.keep:
            print("relint.py: kept " + work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)

    e0, es0, s0, ss0 = res[0]
    e1, es1, _, _ = res[150]
    rows = [
        ("edit -> publishDiagnostics, no debounce (client-observed)", e0, "<= 300 ms"),
        ("  of which the server's analysis (tk_analysis_run)", es0, ""),
        ("edit -> publishDiagnostics, 150 ms debounce (client-observed)", e1, ""),
        ("  of which the server's analysis", es1, ""),
        ("save, nothing changed -> publish (200 files from the cache, link, resolve)", s0, ""),
        ("  of which the server's analysis", ss0, ""),
        ("tkexport analyze --no-cache on the edited file alone (process included)", parse, ""),
    ]
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print("\n%d files (%d op + %d kernel), %d edits per session, %d cores (%s), git %s, %s" %
          (nfiles, a.ops, a.kernels, a.reps, os.cpu_count(), cpu, rev, when))
    for name, xs, _ in rows:
        print("  %-80s median %7.1f ms  (min %.1f, max %.1f)" % (name, med(xs), min(xs), max(xs)))
    print("\n| measurement | median (ms) | min | max | target |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, xs, target in rows:
        verdict = ""
        if target:
            verdict = " (%s)" % ("met" if med(xs) <= 300 else "NOT met")
        print("| %s | %.1f | %.1f | %.1f | %s%s |" % (name.strip(), med(xs), min(xs), max(xs), target, verdict))
    print("\nwarm-up `tkexport analyze .` (cold cache): %.2f s" % cold)
    if a.profile:
        print("(the no-debounce figures above ran under perf, which slows the server down)")
        # lints of the profiled session: after 'initialized', after didOpen, then one per edit and
        # one per save; only the edits parse a file
        phases(perf_data, 2 + 2 * a.reps, a.reps)


PERF_HZ = 1000
# Phases of a lint, matched on the functions of a sample's stack, first match wins.
PHASES = [
    ("server: convert and send diagnostics", ("to_lsp", "send_json", "publish")),
    ("cache: write the new entry", ("tk_cache_put",)),
    ("cache: cJSON parse of 200 summaries", ("cJSON_ParseWithLengthOpts",)),
    ("cache: read entries, check header digests", ("tk_cache_get",)),
    ("cache key: read and SHA-256 each source", ("tk_cache_key", "tk_file_read")),
    # deep libclang stacks are cut by the unwinder before they reach our frames
    ("libclang parse of the edited file", ("tk_frontend_summarize", "clang_", "clang::", "llvm::")),
    ("resolve: link summaries (by USR)", ("link_summaries",)),
    ("resolve: ops and lint checks", ("tk_resolve",)),
    ("output: relative paths, sorting", ("tk_output_finish",)),
    ("walk the workspace (scandir, stat, realpath)", ("walk_dir",)),
    ("free summaries and the document", ("cJSON_Delete", "tk_analysis_free")),
    ("tk_analysis_run, other", ("tk_analysis_run", "worker")),
]


def phases(perf_data, lints, edits):
    out = subprocess.run(["perf", "script", "-i", perf_data, "-F", "tid,ip,sym"], capture_output=True, text=True)
    samples, cur = [], None
    for line in out.stdout.splitlines():
        words = line.split()
        if len(words) == 1 and words[0].isdigit():  # a sample: its thread id, then its stack
            cur = [words[0], []]
            samples.append(cur)
        elif len(words) >= 2 and cur:
            cur[1].append(words[1])
    if not samples:
        print("relint.py: no perf samples (%s)" % out.stderr.strip(), file=sys.stderr)
        return
    main_tid = statistics.mode(t for t, _ in samples)
    count = {}
    for tid, stack in samples:
        joined = " ".join(stack)
        name = next((n for n, keys in PHASES if any(k in joined for k in keys)), "other (libc, unwinding gaps)")
        key = ("main" if tid == main_tid else "workers", name)
        count[key] = count.get(key, 0) + 1
    print("\nCPU time per lint by phase (perf, %d Hz; %d lints of which %d parse one file; parse per edit):" %
          (PERF_HZ, lints, edits))
    print("| thread | phase | CPU ms per lint |\n| --- | --- | ---: |")
    for thread in ("main", "workers"):
        for (t, name), n in sorted(count.items(), key=lambda kv: -kv[1]):
            if t == thread:
                per = edits if name.startswith("libclang") else lints
                print("| %s | %s | %.1f |" % (t, name, n * 1000.0 / PERF_HZ / per))


if __name__ == "__main__":
    main()
