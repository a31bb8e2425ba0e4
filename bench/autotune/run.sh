#!/usr/bin/env bash
# bench/autotune: the tuned SiLU of examples/mlp against its untuned default, 2^10 to 2^28
# elements, on the GPU of this machine, in one run.
#
#   bench/autotune/run.sh BUILD_DIR OUTDIR
#
# 1. exports bench/autotune/model.c (custom_ops::silu on x[n], n in [1, 2^28]);
# 2. compiles it twice: default.tkpkg (no tuning: BLOCK=256 ITEMS=1 everywhere) and, timed,
#    tuned.tkpkg with --autotune (every configuration measured per power-of-two bucket);
# 3. `tkexport inspect tuned.tkpkg`: the tuner's own table (winner vs default per bucket,
#    kernel times from device events, both measured in this run);
# 4. end to end through libtkrt: `tkexport run --bench` of both packages at each size, the two
#    alternating size by size, medians of the host round trip per call.
# Writes OUTDIR/autotune.md (the tables) and the raw outputs beside it. TKPROG=FILE.tkprog uses
# that export of model.c instead of exporting here (a tkexport built without the analyzer).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args 2 2 'BUILD_DIR OUTDIR' "$@"
bench_build "$1"
bench_out "$2"
tk=$build_dir/tkexport
cache=$out/cache
reps=${REPS:-300}

cd "$repo"
if [ -n "${TKPROG:-}" ]; then
    cp "$TKPROG" "$out/act.tkprog"
else
    "$tk" export bench/autotune/model.c examples/mlp/silu_op.c examples/mlp/silu.cu --program act --no-cache \
        -o "$out/act.tkprog"
fi
"$tk" compile "$out/act.tkprog" -o "$out/default.tkpkg" --cache-dir "$cache" --arch sm_90
start=$(date +%s.%N)
"$tk" compile "$out/act.tkprog" -o "$out/tuned.tkpkg" --cache-dir "$cache" --arch sm_90 --autotune \
    2>&1 | tee "$out/tune.log"
end=$(date +%s.%N)
"$tk" inspect "$out/tuned.tkpkg" > "$out/inspect.txt"

{
    echo "# bench/autotune: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo unknown GPU)"
    echo
    echo "Date: $(date -u +%Y-%m-%dT%H:%MZ). Command: bench/autotune/run.sh (REPS=$reps)."
    awk -v a="$start" -v b="$end" 'BEGIN { printf "Tuning compile (12 configurations, every power of two in [1, 2^28]): %.1f s\n\n", b - a }'
    echo "## The tuner's table (kernel time, device events, median of 21 after 3 warm-up calls; a winner must beat the default beyond noise)"
    echo
    echo '```'
    sed -n '/^tuning:/,/^entries/p' "$out/inspect.txt" | sed '$d'
    echo '```'
    echo
    echo "## End to end: tkexport run --bench $reps, median host round trip per call (us)"
    echo
    echo "| elements | default | tuned | default / tuned |"
    echo "| ---: | ---: | ---: | ---: |"
} > "$out/autotune.md"

median_of() { # the median line of tkexport run --bench
    awk '$1 == "median" { print $2; exit }' "$1"
}
for p in $(seq 10 2 28); do
    n=$((1 << p))
    for which in default tuned; do
        "$tk" run "$out/$which.tkpkg" --device cuda --input "x=random:$n" --bench "$reps" \
            > "$out/run_${which}_$p.txt" 2>&1 || true
    done
    d=$(median_of "$out/run_default_$p.txt")
    t=$(median_of "$out/run_tuned_$p.txt")
    if [ -n "$d" ] && [ -n "$t" ]; then
        r=$(awk -v d="$d" -v t="$t" 'BEGIN { printf "%.3f", d / t }')
    else
        r="n/a"
    fi
    echo "| 2^$p | ${d:-failed} | ${t:-failed} | $r |" >> "$out/autotune.md"
done
cat "$out/autotune.md"
