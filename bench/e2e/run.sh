#!/usr/bin/env bash
# The end-to-end benchmark: bench/e2e/run.sh BUILD_DIR OUTDIR
#
#   a. writes the MLP's weights (BUILD_DIR/examples/example_mlp --write-weights), exports
#      examples/mlp and compiles the package for $ARCH with a fresh compile cache, timing both;
#   b. writes the inputs OUTDIR/x_b<B>.npy (float32 [B, 128], deterministic) for each batch;
#   c. runs `tkexport run` on each on $DEVICE with --output-dir OUTDIR/out_b<B> and --bench;
#   d. runs torch_ref.py: the same model and weights in PyTorch (eager, torch.compile default and
#      reduce-overhead, AOTInductor in a subprocess, a floor), and compares tkexport's outputs
#      with eager PyTorch;
#   e. prints one table (batch x {tkexport, eager, compile, reduce-overhead, aoti}) and writes it
#      to OUTDIR/e2e.md (report.py).
#
# Environment: BATCHES ("1 16 256 1024"), BENCH (2000 timed calls), WARMUP (200), ARCH (sm_90),
# DEVICE (cuda), PYTHON (python3), TORCH_ITERS ($BENCH), SKIP_TORCH=1 leaves PyTorch out (its
# columns read n/a), PKG=FILE.tkpkg runs that package instead of exporting and compiling one. Exit status: 0 done, 1 a step failed or tkexport's outputs are more than
# 1e-2 (relative to max |y|) from eager PyTorch's, 2 usage.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args 2 2 'BUILD_DIR OUTDIR' "$@"
bench_build "$1"
bench_out "$2"

tk=$build_dir/tkexport
mlp=$build_dir/examples/example_mlp
batches=${BATCHES:-1 16 256 1024}
bench=${BENCH:-2000}
warmup=${WARMUP:-200}
arch=${ARCH:-sm_90}
device=${DEVICE:-cuda}
python=${PYTHON:-python3}
torch_iters=${TORCH_ITERS:-$bench}

for f in "$tk" "$mlp"; do
    [ -x "$f" ] || { echo "run.sh: '$f' is missing: build the project first (cmake --build $build_dir)" >&2; exit 2; }
done
"$tk" run --help >/dev/null 2>&1 || { echo "run.sh: '$tk' has no working 'run' command" >&2; exit 2; }
command -v "$python" >/dev/null || { echo "run.sh: $python not found (set PYTHON)" >&2; exit 2; }
for b in $batches; do
    case $b in '' | *[!0-9]*) echo "run.sh: BATCHES must be whole numbers, not '$b'" >&2; exit 2 ;; esac
done

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
say() { echo "run.sh: $*" >&2; }

# the machine, for the record
{
    echo "host $(hostname), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo '?')"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu /' || true
    fi
    echo "tkexport $("$tk" --version 2>/dev/null | sed 's/^tkexport //'), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "date $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$out/machine.txt"
cat "$out/machine.txt" >&2

# a. weights, export, compile (a fresh compile cache, so the time is a cold compile); PKG=FILE
#    uses a package made elsewhere instead
printf 'step\tseconds\n' >"$out/build.tsv"
if [ -n "${PKG:-}" ]; then
    cp "$PKG" "$out/mlp.tkpkg"
    say "PKG=$PKG: no export or compile here"
else
    "$mlp" --write-weights "$out/mlp.safetensors"
    t0=$(now)
    (cd "$repo" && "$tk" export examples/mlp --program mlp --weights "$out/mlp.safetensors" -o "$out/mlp.tkprog")
    t1=$(now)
    printf 'export\t%s\n' "$(elapsed "$t0" "$t1")" >>"$out/build.tsv"
    rm -rf "$out/aoti-cache"
    t0=$(now)
    "$tk" compile "$out/mlp.tkprog" -o "$out/mlp.tkpkg" --arch "$arch" --cache-dir "$out/aoti-cache"
    t1=$(now)
    printf 'compile (cold, %s)\t%s\n' "$arch" "$(elapsed "$t0" "$t1")" >>"$out/build.tsv"
    say "export and compile: $(tail -n +2 "$out/build.tsv" | tr '\t\n' ' ,')"
fi
# PyTorch loads the weights the package itself holds: the same bytes by construction
weights=$out/pkg_weights.safetensors
"$python" "$here/npy_io.py" package-weights "$out/mlp.tkpkg" "$weights"

# b. inputs
"$python" "$here/npy_io.py" make-inputs "$out" "$(echo $batches | tr ' ' ',')"

# c. tkexport run per batch
printf 'batch\tcalls\tmedian_us\tp10_us\tp90_us\tp99_us\tmin_us\tcalls_s\tsamples_s\n' >"$out/tkexport.tsv"
for b in $batches; do
    say "tkexport run, batch $b"
    "$tk" run "$out/mlp.tkpkg" --device "$device" --input "x=$out/x_b$b.npy" --output-dir "$out/out_b$b" \
        --bench "$bench" --warmup "$warmup" | tee "$out/run_b$b.txt"
    awk -v b="$b" -v n="$bench" '
        $1 == "median" { med = $2 } $1 == "p10" { p10 = $2 } $1 == "p90" { p90 = $2 } $1 == "p99" { p99 = $2 }
        $1 == "min" { mn = $2 } $1 == "calls/s" { cs = $2 } $1 == "samples/s" { ss = $2 }
        END {
            if (med == "") { print "run.sh: no median in the output of tkexport run" > "/dev/stderr"; exit 1 }
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b, n, med, p10, p90, p99, mn, cs, ss
        }' "$out/run_b$b.txt" >>"$out/tkexport.tsv"
done

# d. PyTorch: a failure here (no torch, no GPU) leaves its columns n/a but does not stop the table
rm -f "$out/torch.json"
if [ "${SKIP_TORCH:-0}" = 1 ]; then
    say "SKIP_TORCH=1: PyTorch left out"
elif ! "$python" "$here/torch_ref.py" --weights "$weights" --inputs-dir "$out" --tk-outputs "$out" \
    --batches "$(echo $batches | tr ' ' ',')" --iters "$torch_iters" --warmup "$warmup" \
    --workdir "$out/aoti" --json "$out/torch.json"; then
    say "torch_ref.py failed (see above): the PyTorch columns read n/a"
fi

# e. the table
"$python" "$here/report.py" "$out"
