#!/usr/bin/env bash
# The analyzer on a small generated tree with the shapes of real CUDA code bases (gen.py
# --real-shapes): every op's exact kernel set, nothing unresolved, no diagnostic, the same map
# with -p as with the paths, and clang-19 agreeing that every source and every lone header parses
# with the analyzer's flags (in the language the analyzer reads it in). No timing: that is
# run.sh's. Used by the analyzer_corpus test.
#   corpus_test.sh BUILD_DIR WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
tk=$1/tkexport
work=$2
clang=${CLANG:-clang-19}
cuda=${CUDA_PATH:-/usr/local/cuda}
if [[ ! -f $cuda/include/cccl/cub/cub.cuh ]] || ! command -v "$clang" >/dev/null; then
    echo "corpus_test: needs CUDA 13 at $cuda (CUB in include/cccl) and $clang: skipped" >&2
    exit 77
fi
rm -rf "$work" && mkdir -p "$work"
tree=$work/tree
python3 "$here/gen.py" "$tree" --ops 24 --kernels 6 --seed 3 --real-shapes --compdb
cd "$tree"
"$tk" analyze --no-cache --format json -o "$work/paths.json" .
"$tk" analyze --no-cache -p . --format json -o "$work/db.json"
python3 "$here/check.py" expected.json "$work/paths.json" --same-as "$work/db.json" --strict

c_flags=(-x c -std=gnu11 -I"$repo/include" -isystem "$cuda/include")
cxx_flags=(-x c++ -std=c++17 -I"$repo/include" -isystem "$cuda/include" -isystem "$cuda/include/cccl")
cu_flags=(-x cuda --cuda-host-only --cuda-gpu-arch=sm_90 --cuda-path="$cuda" -std=c++17 -I"$repo/include"
          -I"$repo/analyzer/shim" -isystem "$cuda/include/cccl" -Wno-unknown-cuda-version)
failed=0
check() { # check FILE FLAGS...
    local f=$1
    shift
    if ! "$clang" -fsyntax-only -w "$@" "$f" 2>"$work/clang.err"; then
        echo "corpus_test: clang-19 rejects $f:" >&2
        head -n 5 "$work/clang.err" >&2
        failed=1
    fi
}
mapfile -t sources < <(python3 -c 'import json; print("\n".join(json.load(open("expected.json"))["sources"]))')
for f in "${sources[@]}"; do
    case $f in
    *.c) check "$f" "${c_flags[@]}" ;;
    *.cu) check "$f" "${cu_flags[@]}" ;;
    esac
done
while IFS=$'\t' read -r f lang; do
    case $lang in
    c) check "$f" "${c_flags[@]}" ;;
    c++) check "$f" "${cxx_flags[@]}" ;;
    cuda) check "$f" "${cu_flags[@]}" ;;
    esac
done < <(python3 -c 'import json
for k, v in sorted(json.load(open("expected.json"))["lone_headers"].items()): print(k + "\t" + v)')
echo "corpus_test: ${#sources[@]} sources and the lone headers parse with clang-19"
exit "$failed"
