# What every bench/*/run.sh starts with; sourced, not run:
#   source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
#   bench_args MIN MAX 'BUILD_DIR OUTDIR' "$@"
#
# bench_args MIN MAX ARGS "$@": -h or --help anywhere prints the script's header comment (from its
# second line to its first line that is not a comment) on stdout and exits 0; a word starting with
# '-', or fewer than MIN or more than MAX words, prints one line with "usage: <script> ARGS" on stderr
# and exits 2.
# bench_build DIR: sets build_dir to DIR as an absolute path, exit 2 where there is no such folder.
# bench_out DIR: creates DIR and sets out to it as an absolute path.
# Sourcing it sets here (the script's folder) and repo (the checkout).

here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench_script=${here#"$repo"/}/$(basename "${BASH_SOURCE[1]}")

bench_args() {
    local min=$1 max=$2 args=$3 word
    shift 3
    for word in "$@"; do
        case $word in
            -h | --help)
                sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$repo/$bench_script"
                exit 0 ;;
            -*)
                echo "$bench_script: unknown option '$word'; usage: $bench_script $args (try --help)" >&2
                exit 2 ;;
        esac
    done
    if [ $# -lt "$min" ] || [ $# -gt "$max" ]; then
        echo "usage: $bench_script $args (try --help)" >&2
        exit 2
    fi
}

bench_build() {
    build_dir=$(cd "$1" 2>/dev/null && pwd) || { echo "$bench_script: no build folder '$1'" >&2; exit 2; }
}

bench_out() {
    mkdir -p "$1" || { echo "$bench_script: cannot create the output folder '$1'" >&2; exit 2; }
    out=$(cd "$1" && pwd)
}
