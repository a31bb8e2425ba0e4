#!/usr/bin/env bash
# An interrupted command leaves nothing behind (issue 16): SIGINT or SIGTERM during `tkexport
# export` (here while its C compiler runs: a stand-in that records its pid and sleeps) ends the
# compiler, removes the temporary folder, and the command dies of the signal (128 + its number).
#   tests/cli_interrupt.sh TKEXPORT MODEL_DIR WORK
set -um  # job control: a background command does not ignore SIGINT
tk=$1 model=$2 work=$3
rm -rf "$work" && mkdir -p "$work/tmp"
cat > "$work/slow-cc" <<'CC'
#!/usr/bin/env bash
echo $$ > "$SLOW_CC_PIDFILE"
sleep 120
CC
chmod +x "$work/slow-cc"
fail() { echo "cli_interrupt: $*" >&2; exit 1; }
for sig in INT TERM; do
    pidfile=$work/cc.$sig.pid
    rm -f "$pidfile"
    TMPDIR=$work/tmp CC=$work/slow-cc SLOW_CC_PIDFILE=$pidfile TKEXPORT_CACHE_DIR=$work/cache \
        "$tk" export "$model" --program mlp -o "$work/out.tkprog" > "$work/out.$sig.txt" 2>&1 &
    tkpid=$!
    for _ in $(seq 1 200); do [ -s "$pidfile" ] && break; sleep 0.05; done
    [ -s "$pidfile" ] || fail "the compiler never started (SIG$sig): $(cat "$work/out.$sig.txt")"
    ccpid=$(cat "$pidfile")
    ls "$work/tmp" | grep -q '^tkexport-' || fail "no temporary folder while compiling (SIG$sig)"
    kill -s "$sig" "$tkpid"
    wait "$tkpid"
    rc=$?
    want=$((128 + $(kill -l "$sig")))
    [ "$rc" = "$want" ] || fail "exit status $rc after SIG$sig, expected $want"
    for _ in $(seq 1 100); do kill -0 "$ccpid" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$ccpid" 2>/dev/null; then
        kill -9 "$ccpid"
        fail "the compiler (pid $ccpid) outlived tkexport after SIG$sig"
    fi
    left=$(ls -A "$work/tmp")
    [ -z "$left" ] || fail "left in TMPDIR after SIG$sig: $left"
    [ ! -e "$work/out.tkprog" ] || fail "a half-written out.tkprog after SIG$sig"
done
echo "cli_interrupt: ok"
