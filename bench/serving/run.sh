#!/usr/bin/env bash
# The serving benchmark: bench/serving/run.sh BUILD_DIR OUTDIR   (README.md beside this file)
#
# Builds nothing: the binaries come from BUILD_DIR (tkexport, bench/serving/bench_serving,
# bench/serving/bench_open, examples/example_mlp). Everything it writes goes to OUTDIR.
#
#   a. the packages: mlp (examples/mlp) and tokmlp (bench/serving/tokmlp), from TKPROG_DIR/<m>.tkprog
#      when given (the GPU machine's build has no `tkexport export`), else exported here; compiled
#      for $ARCH; their weights read back out for PyTorch;
#   b. bench_serving on each: first calls of new shapes (one shape a row in first_<m>.csv; again with
#      TK_CUBLASLT_EXACT=1: a heuristic query per new size instead of the size bucket's checked
#      algorithm), then the streams fixed, cycle and uniform on 1..N threads;
#   c. `tkexport run --shapes cycle|uniform --bench` on each (the CLI's view of the same);
#   d. torch_serving.py on each: the same streams in eager, compile and reduce-overhead (dynamic);
#   e. the large-weights package (weights.py bigprog, about $BIG_GIB GiB) compiled, then
#      bench_open twice (with DROP_CACHES=1 the page cache dropped first, as root; then warm):
#      open and first session times, peak memory; the package is deleted afterwards;
#   f. rounds (PARTS has "rounds"): the goals' figures as medians over repeated runs, the machine
#      being noisy: ROUNDS rounds of 1 and 4 threads at the fixed batch on each package (the ratio of
#      their calls/s), then SEEDS seeds of FIRST first calls and of the uniform stream on one thread
#      ($CALLS calls) on each, bound and prefilled over the whole space (--bind --max-shapes 32768);
#   g. report.py: OUTDIR/serving.md.
#
# Environment: DEVICE (cuda:0), CALLS (2000 per thread), WARMUP (200), FIRST (1000 new shapes: a p99
# over 200 is the second or third slowest call, one hiccup of the machine),
# THREADS ("1 2 4 8"), STREAMS (fixed,cycle,uniform), ARCH (sm_90), PYTHON (python3), TORCH_CALLS
# ($CALLS), TORCH_MODES (eager,compile,reduce-overhead), SKIP_TORCH=1, BIG_GIB (8; 0 leaves the
# large-weights part out), KEEP_BIG=1 (keep big.tkpkg), DROP_CACHES=1, TKPROG_DIR, EXPORT_ONLY=1 (write
# OUTDIR/mlp.tkprog and OUTDIR/tokmlp.tkprog and stop: what the GPU machine needs in TKPROG_DIR),
# PREFILL (auto|now|off: bench_serving --prefill), MAX_SHAPES (bench_serving --max-shapes), BIND=1
# (bench_serving --bind), ROUNDS (7), SEEDS (10), ROUND_CALLS (5000 a thread) and ROUND_WARMUP (1000):
# step f's rounds and seeds,
# PARTS (default "serving cli torch big rounds": steps b to f to run; calls with other PARTS into the
# same OUTDIR add to it, for machines that limit how long one command runs).
# Exit status: 0 done, 1 a step failed, 2 usage.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args 2 2 'BUILD_DIR OUTDIR' "$@"
bench_build "$1"
bench_out "$2"

tk=$build_dir/tkexport
serving=$build_dir/bench/serving/bench_serving
opener=$build_dir/bench/serving/bench_open
mlp_exe=$build_dir/examples/example_mlp
device=${DEVICE:-cuda:0}
calls=${CALLS:-2000}
warmup=${WARMUP:-200}
first=${FIRST:-1000}
threads=${THREADS:-1 2 4 8}
streams=${STREAMS:-fixed,cycle,uniform}
arch=${ARCH:-sm_90}
python=${PYTHON:-python3}
torch_calls=${TORCH_CALLS:-$calls}
torch_modes=${TORCH_MODES:-eager,compile,reduce-overhead}
big_gib=${BIG_GIB:-8}
parts=" ${PARTS:-serving cli torch big rounds} "
rounds=${ROUNDS:-7}
seeds=${SEEDS:-10}
round_calls=${ROUND_CALLS:-5000}
round_warmup=${ROUND_WARMUP:-1000}

say() { echo "run.sh: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

for f in "$tk" "$serving" "$opener"; do
    [ -x "$f" ] || { echo "run.sh: '$f' is missing: build the project first (cmake --build $build_dir)" >&2; exit 2; }
done
command -v "$python" >/dev/null || { echo "run.sh: $python not found (set PYTHON)" >&2; exit 2; }
case $big_gib in '' | *[!0-9.]*) echo "run.sh: BIG_GIB must be a number of GiB, not '$big_gib'" >&2; exit 2 ;; esac
for v in "ROUNDS=$rounds" "SEEDS=$seeds" "ROUND_CALLS=$round_calls" "ROUND_WARMUP=$round_warmup"; do
    case ${v#*=} in '' | *[!0-9]*) echo "run.sh: ${v%%=*} must be a whole number, not '${v#*=}'" >&2; exit 2 ;; esac
done

# a. the programs: carried, or exported here
for m in mlp tokmlp; do
    if [ -n "${TKPROG_DIR:-}" ] && [ -f "$TKPROG_DIR/$m.tkprog" ]; then
        cp "$TKPROG_DIR/$m.tkprog" "$out/$m.tkprog"
        continue
    fi
    "$tk" export --help >/dev/null 2>&1 || {
        echo "run.sh: '$tk' cannot export (a build without the analyzer): set TKPROG_DIR to a folder with $m.tkprog" >&2
        exit 2
    }
    if [ $m = mlp ]; then
        "$mlp_exe" --write-weights "$out/mlp.safetensors"
        src=examples/mlp
    else
        "$python" "$here/weights.py" tokmlp "$out/tokmlp.safetensors"
        src=bench/serving/tokmlp
    fi
    (cd "$repo" && "$tk" export $src --program $m --weights "$out/$m.safetensors" -o "$out/$m.tkprog")
done
if [ "${EXPORT_ONLY:-0}" = 1 ]; then
    say "EXPORT_ONLY=1: wrote $out/mlp.tkprog and $out/tokmlp.tkprog"
    exit 0
fi

# the machine, for the record
{
    echo "host $(hostname), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo '?')"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu /' || true
    fi
    echo "tkexport $("$tk" --version 2>/dev/null | sed 's/^tkexport //'), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "device $device, calls $calls per thread, warmup $warmup, first $first, threads '$threads', streams $streams"
    echo "date $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$out/machine.txt"
cat "$out/machine.txt" >&2

[ -f "$out/build.tsv" ] || printf 'step\tseconds\n' >"$out/build.tsv"
for m in mlp tokmlp; do
    t0=$(now)
    "$tk" compile "$out/$m.tkprog" -o "$out/$m.tkpkg" --arch "$arch" --cache-dir "$out/aoti-cache"
    printf 'compile %s\t%s\n' "$m" "$(elapsed "$t0" "$(now)")" >>"$out/build.tsv"
    "$python" "$repo/bench/e2e/npy_io.py" package-weights "$out/$m.tkpkg" "$out/${m}_weights.safetensors"
done

# b. bench_serving: first calls (the default, then a heuristic query per new size), then the streams
status=0
for m in mlp tokmlp; do
    [[ $parts == *" serving "* ]] || break
    say "bench_serving $m"
    "$serving" "$out/$m.tkpkg" --device "$device" --streams "$streams" --threads "$(echo $threads | tr ' ' ',')" \
        --calls "$calls" --warmup "$warmup" --first "$first" --label tkexport \
        ${PREFILL:+--prefill "$PREFILL"} ${MAX_SHAPES:+--max-shapes "$MAX_SHAPES"} ${BIND:+--bind} \
        --json "$out/serving_$m.json" --csv "$out/serving_$m.csv" --first-csv "$out/first_$m.csv" \
        | tee "$out/serving_$m.txt" || status=1
    TK_CUBLASLT_EXACT=1 "$serving" "$out/$m.tkpkg" --device "$device" --streams none --first "$first" \
        --label exact-heuristic --json "$out/first_exact_$m.json" >"$out/first_exact_$m.txt" || status=1
done

# c. the CLI over the same streams (fixed is --input's shape there: left out)
for m in mlp tokmlp; do
    [[ $parts == *" cli "* ]] || break
    for s in $(echo "$streams" | tr ',' ' '); do
        [ "$s" != fixed ] || continue
        "$tk" run "$out/$m.tkpkg" --device "$device" --shapes $s --bench "$calls" --warmup "$warmup" \
            >"$out/cli_${m}_$s.txt" || status=1
    done
done

# d. PyTorch, the same streams: a failure (no torch, no GPU) leaves its columns empty
if [ "${SKIP_TORCH:-0}" = 1 ] || [[ $parts != *" torch "* ]]; then
    say "PyTorch left out (SKIP_TORCH=1, or no 'torch' in PARTS)"
else
    for m in mlp tokmlp; do
        say "torch_serving.py $m"
        "$python" "$here/torch_serving.py" --model $m --weights "$out/${m}_weights.safetensors" --streams "$streams" \
            --modes "$torch_modes" --calls "$torch_calls" --warmup "$warmup" --first "$first" \
            --json "$out/torch_$m.json" || say "torch_serving.py $m failed (see above): its columns read n/a"
    done
fi

# e. large weights: the package made and compiled here (several GiB: nothing is carried), opened
if [[ $parts == *" big "* ]] && awk -v g="$big_gib" 'BEGIN { exit !(g > 0) }'; then
    say "large weights: about $big_gib GiB"
    t0=$(now)
    "$python" "$here/weights.py" bigprog --gib "$big_gib" "$out/big.tkprog"
    printf 'write big.tkprog\t%s\n' "$(elapsed "$t0" "$(now)")" >>"$out/build.tsv"
    t0=$(now)
    "$tk" compile "$out/big.tkprog" -o "$out/big.tkpkg" --arch "$arch" --cache-dir "$out/aoti-cache"
    printf 'compile big\t%s\n' "$(elapsed "$t0" "$(now)")" >>"$out/build.tsv"
    rm -f "$out/big.tkprog"
    # DROP_CACHES=1: the first open with the page cache dropped (root only; it slows every
    # process of the machine for a moment), so it reads the file from disk; the second cached
    sync
    cache=warm
    if [ "${DROP_CACHES:-0}" = 1 ] && [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
        cache=dropped
    fi
    echo "page cache before the first open: $cache" >"$out/open_big.txt"
    "$opener" "$out/big.tkpkg" --device "$device" --run --json "$out/open_big.json" | tee -a "$out/open_big.txt" || status=1
    "$opener" "$out/big.tkpkg" --device "$device" --json "$out/open_big_again.json" >"$out/open_big_again.txt" || status=1
    [ "${KEEP_BIG:-0}" = 1 ] || rm -f "$out/big.tkpkg"
fi

# f. rounds: 1 and 4 threads at the fixed batch, ROUNDS times, the packages in turn; then SEEDS seeds
#    of first calls and of the uniform stream on each, bound and prefilled over the whole space (what
#    a service set up as docs/runtime.md says gets)
if [[ $parts == *" rounds "* ]]; then
    say "rounds: $rounds of 1 and 4 threads, $seeds seeds of $first first calls and the uniform stream"
    bind=--bind
    [ "$device" != cpu ] || bind= # a CPU session has no graphs to bind buffers to (the dry run's)
    for r in $(seq 1 "$rounds"); do
        for m in mlp tokmlp; do
            "$serving" "$out/$m.tkpkg" --device "$device" --streams fixed --threads 1,4 --calls "$round_calls" --warmup "$round_warmup" \
                --first 0 $bind --label "round $r" --json "$out/round_${m}_$r.json" >"$out/round_${m}_$r.txt" || status=1
        done
    done
    for s in $(seq 1 "$seeds"); do
        for m in mlp tokmlp; do
            "$serving" "$out/$m.tkpkg" --device "$device" --streams uniform --threads 1 --calls "$calls" \
                --warmup "$warmup" --first "$first" $bind --max-shapes 32768 --seed "$s" --label "seed $s" \
                --json "$out/seed_${m}_$s.json" >"$out/seed_${m}_$s.txt" || status=1
        done
    done
fi

# g. the report
"$python" "$here/report.py" "$out" || status=1
exit $status
