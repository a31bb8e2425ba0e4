#!/usr/bin/env bash
# bench/hash/run.sh BUILD_DIR [REV]: SHA-256 throughput, side by side: BUILD_DIR/bench/hash/bench_hash
# (common/sha256.c as built: OpenSSL's EVP SHA-256) and the same bench compiled against the
# portable C implementation of common/sha256.c at REV (default 298cee0, the last commit with it).
# MIB and ROUNDS (defaults 256 and 5) are passed to both.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args 1 2 'BUILD_DIR [REV]' "$@"
bench_build "$1"
rev=${2:-298cee0}
mib=${MIB:-256}
rounds=${ROUNDS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$repo" show "$rev:common/sha256.c" >"$tmp/sha256.c"
git -C "$repo" show "$rev:common/sha256.h" >"$tmp/sha256.h"
"${CC:-cc}" -std=c11 -O2 -I"$tmp" -I"$repo/include" -I"$repo/common" "$repo/bench/hash/bench_hash.c" "$tmp/sha256.c" \
    -o "$tmp/bench_hash_portable"
echo "machine: $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
     "SHA-NI: $(grep -qw sha_ni /proc/cpuinfo && echo yes || echo no), $(openssl version 2>/dev/null || echo 'openssl ?')"
echo "portable C ($rev): $("$tmp/bench_hash_portable" "$mib" "$rounds")"
echo "OpenSSL EVP:        $("$build_dir/bench/hash/bench_hash" "$mib" "$rounds")"
