#!/usr/bin/env bash
# The analyzer benchmark: bench/analyzer/run.sh [BUILD_DIR]
#
# Generates a synthetic code base (gen.py) into a temporary folder and reports the median wall
# time of REPS repetitions of:
#   a. clang-19 -fsyntax-only over all the files, in one process (the baseline);
#   b. cold `tkexport analyze` (a fresh, empty summary cache each repetition);
#   c. warm `tkexport analyze` (the populated cache, unchanged tree);
#   d. warm `tkexport analyze` after an edit to one op file;
# with the ratios cold/clang (target <= 1.0) and cold/warm (target >= 10). Prints a plain table,
# then the same as markdown for bench/analyzer/RESULTS.md. b-d are skipped, with a message, when
# BUILD_DIR/tkexport is missing or has no working `analyze` subcommand.
#
# Environment: REPS (5), BENCH_OPS (160), BENCH_KERNELS (20), BENCH_SEED (1), CLANG (clang-19),
# CUDA_PATH (/usr/local/cuda), ANALYZE_ARGS (extra words for `tkexport analyze`), KEEP=1 keeps
# the generated tree and logs.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args 0 1 '[BUILD_DIR]' "$@"
build_dir=${1:-$repo/build}
build_dir=$(cd "$build_dir" 2>/dev/null && pwd || echo "$build_dir")
tk=$build_dir/tkexport

reps=${REPS:-5}
n_ops=${BENCH_OPS:-160}
n_kernels=${BENCH_KERNELS:-20}
seed=${BENCH_SEED:-1}
clang=${CLANG:-clang-19}
cuda=${CUDA_PATH:-/usr/local/cuda}
read -r -a analyze_extra <<<"${ANALYZE_ARGS:-}"

if ! [[ $reps =~ ^[1-9][0-9]*$ ]]; then
    echo "run.sh: REPS must be a positive integer, not '$reps'" >&2
    exit 2
fi
command -v "$clang" >/dev/null || { echo "run.sh: $clang not found (set CLANG)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "run.sh: python3 not found" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tkbench.XXXXXX")
cleanup() {
    if [[ ${KEEP:-0} == 1 ]]; then
        echo "run.sh: kept $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tree=$work/tree
shapes=()
[[ ${REAL_SHAPES:-1} == 1 ]] && shapes=(--real-shapes)
python3 "$here/gen.py" "$tree" --ops "$n_ops" --kernels "$n_kernels" --seed "$seed" "${shapes[@]}" --compdb
sources_of() { # sources_of LANG: the generated files the analyzer parses in LANG
    (cd "$tree" && python3 -c 'import json, sys
e = json.load(open("expected.json"))
lang = sys.argv[1]
files = [s for s in e["sources"] if (s.endswith(".cu") if lang == "cuda" else lang == "c" and s.endswith(".c"))]
files += [h for h, l in sorted(e.get("lone_headers", {}).items()) if l == lang]
print("\n".join(files))' "$1")
}
mapfile -t c_files < <(sources_of c)
mapfile -t cu_files < <(sources_of cuda)
mapfile -t cxx_files < <(sources_of c++)
n_files=$((${#c_files[@]} + ${#cu_files[@]} + ${#cxx_files[@]}))
n_lines=$(cd "$tree" && cat "${c_files[@]}" "${cu_files[@]}" "${cxx_files[@]}" | wc -l)

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() {
    printf '%s\n' "$@" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2];
                                  else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
verdict() { # verdict VALUE OP TARGET
    awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
        if (v == "n/a") { print "n/a"; exit }
        ok = (op == "<=") ? (v <= t) : (v >= t); print ok ? "met" : "NOT met" }'
}

# ---- a. clang -fsyntax-only, all files, one process. clang's -x applies to the inputs after
# it. -std=c11 cannot be given: clang refuses it for the CUDA inputs of the same invocation, so
# the C files parse under clang's default (gnu17), which costs the same.
clang_cmd=("$clang" -fsyntax-only
    -I"$repo/include" -I"$cuda/include" -x c "${c_files[@]}"
    -x cuda --cuda-host-only --cuda-gpu-arch=sm_90 --cuda-path="$cuda" -isystem "$cuda/include/cccl"
    -I"$repo/include" -I"$repo/analyzer/shim" -Wno-unknown-cuda-version "${cu_files[@]}")
((${#cxx_files[@]})) && clang_cmd+=(-x c++ "${cxx_files[@]}")
echo "run.sh: ${#c_files[@]} C + ${#cu_files[@]} CUDA + ${#cxx_files[@]} C++ files, $n_lines lines; $reps repetitions" >&2
clang_times=()
clang_status=ok
for ((r = 1; r <= reps; r++)); do
    t0=$(now)
    rc=0
    (cd "$tree" && "${clang_cmd[@]}") >"$work/clang.out" 2>"$work/clang.err" || rc=$?
    t1=$(now)
    clang_times+=("$(elapsed "$t0" "$t1")")
    if [[ $r == 1 ]]; then
        n_err=$(grep -c 'error:' "$work/clang.err" || true)
        n_warn=$(grep -c 'warning:' "$work/clang.err" || true)
        if [[ $rc != 0 || $n_err != 0 ]]; then
            clang_status="FAILED (rc $rc, $n_err errors)"
            echo "run.sh: clang reported errors on the generated files:" >&2
            head -n 20 "$work/clang.err" >&2
        elif [[ $n_warn != 0 ]]; then
            clang_status="ok ($n_warn warnings)"
        fi
    fi
    echo "  clang rep $r: ${clang_times[-1]} s" >&2
done
clang_med=$(median "${clang_times[@]}")

# ---- b-d. tkexport analyze
analyze_status=""
cold_med=n/a warm_med=n/a touch_med=n/a check=""
if [[ ! -x $tk ]]; then
    analyze_status="skipped: $tk does not exist (cmake -S . -B build && cmake --build build)"
else
    help_rc=0
    help=$("$tk" analyze --help 2>&1) || help_rc=$?
    if [[ $help_rc != 0 && $help != *--* ]]; then
        analyze_status="skipped: '$tk analyze --help' failed (rc $help_rc): $(head -n 1 <<<"$help")"
    fi
fi

if [[ -z $analyze_status ]]; then
    # build the command from what `analyze --help` offers
    a_args=()
    use_cache_opt=0
    [[ $help == *--cache-dir* ]] && use_cache_opt=1
    out_json=""
    short_o_re='(^|[^a-zA-Z-])-o([^a-zA-Z]|$)'
    if [[ $help == *--format* && $help == *json* ]]; then
        out_json=$work/analyze.json
        a_args+=(--format json -o "$out_json")
    elif [[ $help =~ $short_o_re || $help == *--output* ]]; then
        a_args+=(-o /dev/null)
    fi
    if [[ $help == *--extra-arg=* ]]; then
        a_args+=("--extra-arg=-I$repo/include")
    elif [[ $help == *--extra-arg* ]]; then
        a_args+=(--extra-arg "-I$repo/include")
    fi
    a_args+=("${analyze_extra[@]}")

    run_analyze() { # run_analyze CACHE_DIR LOG_PREFIX; sets last_time, returns analyze's status
        local cache=$1 log=$2 t0 t1 rc=0
        local cmd=("$tk" analyze)
        ((use_cache_opt)) && cmd+=(--cache-dir "$cache")
        cmd+=("${a_args[@]}" .)
        t0=$(now)
        (cd "$tree" && TKEXPORT_CACHE_DIR=$cache "${cmd[@]}") >"$log.out" 2>"$log.err" || rc=$?
        t1=$(now)
        last_time=$(elapsed "$t0" "$t1")
        if [[ $rc != 0 ]]; then
            echo "run.sh: '${cmd[*]}' exited with $rc; its stderr ends:" >&2
            tail -n 15 "$log.err" >&2
        fi
        return "$rc"
    }

    cold_times=() warm_times=() touch_times=()
    failed=0
    for ((r = 1; r <= reps; r++)); do
        cache=$work/cache.$r
        rm -rf "$cache" && mkdir -p "$cache"
        if ! run_analyze "$cache" "$work/cold.$r"; then failed=1 && break; fi
        cold_times+=("$last_time")
        echo "  cold rep $r: $last_time s" >&2
    done
    if ((failed)); then
        analyze_status="FAILED: tkexport analyze exited with an error (see above)"
    fi
    if ((!failed)) && [[ -n $out_json && -s $out_json ]]; then
        # best effort: compare the op map with the generator's ground truth
        # the same tree through compile_commands.json: the op map must not change
        db_json=$work/analyze_db.json
        (cd "$tree" && "$tk" analyze --no-cache -p . --format json -o "$db_json") >/dev/null 2>&1 || true
        check=$(python3 "$here/check.py" "$tree/expected.json" "$out_json" --same-as "$db_json" | tr '\n' ' ' || true)
        n_parse=$(python3 -c 'import json, sys
print(sum(d.get("rule") == "tk-parse-error" for d in json.load(open(sys.argv[1]))["diagnostics"]))' "$out_json")
        check="$check; tk-parse-error findings: $n_parse"
    fi
    if ((!failed)); then
        cache=$work/cache.$reps # populated by the last cold run
        for ((r = 1; r <= reps; r++)); do
            if ! run_analyze "$cache" "$work/warm.$r"; then failed=1 && break; fi
            warm_times+=("$last_time")
            echo "  warm rep $r: $last_time s" >&2
        done
    fi
    if ((!failed)); then
        touched=${c_files[$((${#c_files[@]} / 2))]}
        cp "$tree/$touched" "$work/touched.orig"
        for ((r = 1; r <= reps; r++)); do
            # a real token change (a new declaration), different at every repetition
            cp "$work/touched.orig" "$tree/$touched"
            printf 'int bench_touch_%d(void);\n' "$r" >>"$tree/$touched"
            if ! run_analyze "$cache" "$work/touch.$r"; then failed=1 && break; fi
            touch_times+=("$last_time")
            echo "  warm+edit rep $r: $last_time s" >&2
        done
        cp "$work/touched.orig" "$tree/$touched"
    fi
    if ((failed)) && [[ -z $analyze_status ]]; then
        analyze_status="FAILED: tkexport analyze exited with an error (see above)"
    fi
    ((${#cold_times[@]})) && cold_med=$(median "${cold_times[@]}")
    ((${#warm_times[@]})) && warm_med=$(median "${warm_times[@]}")
    ((${#touch_times[@]})) && touch_med=$(median "${touch_times[@]}")
    [[ -z $analyze_status ]] && analyze_status="ok"
fi
if [[ $analyze_status == skipped* ]]; then
    echo "run.sh: tkexport analyze $analyze_status; measuring clang only" >&2
fi

cold_clang=n/a cold_warm=n/a
[[ $cold_med != n/a ]] && cold_clang=$(ratio "$cold_med" "$clang_med")
[[ $cold_med != n/a && $warm_med != n/a ]] && cold_warm=$(ratio "$cold_med" "$warm_med")

# ---- report
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//' || true)
cpu=${cpu:-unknown}
rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "none (no commits)")
if [[ $rev != none* && -n $(git -C "$repo" status --porcelain 2>/dev/null | head -n 1) ]]; then
    rev="$rev (dirty)"
fi
when=$(date -u '+%Y-%m-%d %H:%M UTC')
clang_ver=$("$clang" --version | head -n 1)
cores=$(nproc)
tree_desc="$n_ops op files + $n_kernels kernel files (seed $seed)${shapes:+ + real shapes}: ${#c_files[@]} C, ${#cu_files[@]} CUDA, ${#cxx_files[@]} C++ files, $n_lines lines"
per_file() { awk -v t="$1" -v n="$n_files" 'BEGIN { if (t == "n/a" || n == 0) print "n/a"; else printf "%.1f", 1000 * t / n }'; }
touched_desc=${touched:-}

echo
echo "analyzer benchmark: median of $reps, seconds"
printf '  %-44s %10s\n' "clang -fsyntax-only, all files, one process" "$clang_med" \
    "tkexport analyze, cold (empty cache)" "$cold_med" \
    "tkexport analyze, warm (unchanged tree)" "$warm_med" \
    "tkexport analyze, warm after editing 1 file" "$touch_med"
printf '  %-44s %10s  (target <= 1.0: %s)\n' "ratio cold / clang" "$cold_clang" "$(verdict "$cold_clang" "<=" 1.0)"
printf '  %-44s %10s  (target >= 10: %s)\n' "ratio cold / warm" "$cold_warm" "$(verdict "$cold_warm" ">=" 10)"
echo "  clang: $clang_status; analyze: $analyze_status"
[[ -n $check ]] && echo "  analyze output check: $check"
echo "  tree: $tree_desc"
echo "  machine: $cores cores, $cpu; $when; git $rev; $clang_ver"

cat <<EOF

----- markdown (for bench/analyzer/RESULTS.md) -----
### $when, git $rev

Machine: $cores cores, $cpu. Tree: $tree_desc. Median of $reps repetitions.

| measurement | median (s) |
| --- | ---: |
| clang-19 -fsyntax-only, all files, one process | $clang_med |
| tkexport analyze, cold (empty cache) | $cold_med |
| tkexport analyze, warm (unchanged tree) | $warm_med |
| tkexport analyze, warm after editing 1 file | $touch_med |

| per file ($n_files files) | ms |
| --- | ---: |
| clang-19 -fsyntax-only | $(per_file "$clang_med") |
| tkexport analyze, cold | $(per_file "$cold_med") |
| tkexport analyze, warm | $(per_file "$warm_med") |

| ratio | value | target |
| --- | ---: | --- |
| cold / clang | $cold_clang | <= 1.0 ($(verdict "$cold_clang" "<=" 1.0)) |
| cold / warm | $cold_warm | >= 10 ($(verdict "$cold_warm" ">=" 10)) |

clang: $clang_status. analyze: $analyze_status.${check:+ Output check: $check.}${touched_desc:+ Edited file: $touched_desc.} $clang_ver.
EOF

[[ $clang_status == FAILED* || $analyze_status == FAILED* ]] && exit 1
exit 0
