#!/usr/bin/env bash
# The compile benchmark: bench/compile/run.sh BUILD_DIR OUTDIR
#
# Exports examples/mlp once, then times `tkexport compile` of it REPS times cold (a fresh, empty
# --cache-dir each time: nvcc and the host compiler run) and REPS times warm (the cache of an
# earlier compile: every fatbin and the host object come from it), and prints the medians, with
# the machine, as a table that also goes to OUTDIR/compile.md.
#
# Environment: REPS (5), ARCH (sm_90; nvcc compiles for it whether or not such a GPU is there),
# TKPROG=FILE.tkprog compiles that program instead of exporting examples/mlp here (for machines
# whose tkexport is built without the analyzer).
# Exit status: 0 done, 1 a step failed, 2 usage.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args 2 2 'BUILD_DIR OUTDIR' "$@"
bench_build "$1"
bench_out "$2"
tk=$build_dir/tkexport
mlp=$build_dir/examples/example_mlp
reps=${REPS:-5}
arch=${ARCH:-sm_90}
case $reps in '' | *[!0-9]* | 0) echo "run.sh: REPS must be a positive whole number, not '$reps'" >&2; exit 2 ;; esac
for f in "$tk" "$mlp"; do
    [ -x "$f" ] || { echo "run.sh: '$f' is missing: build the project first (cmake --build $build_dir)" >&2; exit 2; }
done

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

machine="$(hostname), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo '?')"
nvcc_version=$("${TKEXPORT_NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}" --version 2>/dev/null | grep -m1 release | sed 's/.*release /release /' || echo '?')
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')

if [ -n "${TKPROG:-}" ]; then
    cp "$TKPROG" "$out/mlp.tkprog"
    t_export="n/a (TKPROG)"
else
    "$mlp" --write-weights "$out/mlp.safetensors"
    t0=$(now)
    (cd "$repo" && "$tk" export examples/mlp --program mlp --weights "$out/mlp.safetensors" -o "$out/mlp.tkprog")
    t_export=$(elapsed "$t0" "$(now)")
fi

compile() { # compile CACHE_DIR: prints the seconds it took
    local t0 t1
    t0=$(now)
    "$tk" compile "$out/mlp.tkprog" -o "$out/mlp.tkpkg" --arch "$arch" --cache-dir "$1" --quiet
    t1=$(now)
    elapsed "$t0" "$t1"
}

cold=()
for i in $(seq "$reps"); do
    rm -rf "$out/cache-cold"
    cold+=("$(compile "$out/cache-cold")")
    echo "run.sh: cold compile $i: ${cold[-1]} s" >&2
done
rm -rf "$out/cache-warm"
compile "$out/cache-warm" >/dev/null # fills the cache
warm=()
for i in $(seq "$reps"); do
    warm+=("$(compile "$out/cache-warm")")
    echo "run.sh: warm compile $i: ${warm[-1]} s" >&2
done
cold_med=$(median "${cold[@]}")
warm_med=$(median "${warm[@]}")

{
    echo "# tkexport compile of examples/mlp: cold and warm"
    echo
    echo "Machine: $machine; nvcc $nvcc_version; tkexport commit $commit; $(date -u +%Y-%m-%dT%H:%MZ)."
    echo "\`tkexport compile mlp.tkprog -o mlp.tkpkg --arch $arch\`, median of $reps runs each"
    echo "(cold: a fresh, empty --cache-dir every run; warm: the cache filled by an earlier compile)."
    echo
    echo "| step | median (s) | runs (s) |"
    echo "| --- | ---: | --- |"
    echo "| export (once) | $t_export | $t_export |"
    echo "| compile, cold | $cold_med | ${cold[*]} |"
    echo "| compile, warm | $warm_med | ${warm[*]} |"
} >"$out/compile.md.tmp"
mv "$out/compile.md.tmp" "$out/compile.md"
cat "$out/compile.md"
