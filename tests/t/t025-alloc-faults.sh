#!/usr/bin/env bash
# t025-alloc-faults.sh - every allocation of dlk's own code failing in
# turn (make fault: tests/fault/fail_alloc.c, the way SQLite's and curl's
# test builds fail the Nth malloc): each case runs once to count its
# allocations, then once with each of them failing (every one, or evenly
# spaced ones up to MAX_RUNS a case).  Each run must end with exit 0 or
# with exit 3 and an out-of-memory message (never a signal, a hang, a
# wrong complaint, or "problems found" for data that is fine); after a
# writer's run the dataset verifies with the normal build and holds the
# rows of before or of after, never others.  Readers: ls, cat, verify
# --deep, bench-stream on the cpu; writers: ingest (keyed .npy rows),
# commit, query --save-view.  Under SAN=1 the fault build is sanitized
# too (build-fault-san/): the error paths checked for leaks and bad
# accesses, fewer runs a case (MAX_RUNS 40).
. "$DLK_TESTS/lib.sh"
root=$(cd "$DLK_TESTS/.." && pwd)
if [ -n "${SAN:-}" ] && [ "$SAN" != thread ]; then
    MAX_RUNS=${MAX_RUNS:-40}
    F=$root/build-fault-san/dlk
    ok "make fault SAN=1 (dlk failing its Nth allocation on demand, sanitized)" \
        env -u MAKEFLAGS -u MAKELEVEL make -s -C "$root" fault SAN=1
else
    MAX_RUNS=${MAX_RUNS:-100}
    F=$root/build-fault/dlk
    ok "make fault (dlk failing its Nth allocation on demand)" \
        env -u MAKEFLAGS -u MAKELEVEL -u SAN make -s -C "$root" fault
fi
[ -x "$F" ] || exit 1

python3 "$root/examples/sample_data.py" "$T/src" --samples 40 --size 16 >/dev/null
python3 "$root/examples/sample_data.py" "$T/more" --samples 20 --size 16 >/dev/null
mkdir -p "$T/src2/b" && mv "$T/more"/* "$T/src2/b/"
ok "a dataset of 40 rows, committed" sh -c '"$1" create "$2" --tensor images:u8:16x16x3 \
    --tensor labels:i32 --tensor "boxes:f32:?x4" --chunk-size 4K >/dev/null &&
    "$1" ingest "$2" from-dir "$3" --quiet && "$1" commit "$2" -m first >/dev/null' \
    sh "$DLK" "$T/base" "$T/src"

rows() { "$DLK" ls "$1" --json | python3 -c 'import json, sys
print(min(t["samples"] for t in json.load(sys.stdin)["tensors"] if t["name"] == "labels"))'; }

# sweep NAME WRITER AFTER-CHECK CMD...: CMD (with W for the dataset) with
# each allocation failing; a writer runs on a fresh copy each time
sweep() {
    local name=$1 writer=$2 after=$3; shift 3
    local args=() a
    for a in "$@"; do args+=("${a//@W@/$T/w}"); done
    rm -rf "$T/w" && cp -r "$T/base" "$T/w"
    DLK_ALLOC_COUNT=$T/count "$F" "${args[@]}" >/dev/null 2>&1
    local n
    n=$(cat "$T/count" 2>/dev/null || echo 0)
    local step=$(( (n + MAX_RUNS - 1) / MAX_RUNS )) bad=0 runs=0 i rc why
    [ "$step" -ge 1 ] || step=1
    for ((i = 1; i <= n; i += step)); do
        [ "$writer" = 0 ] || { rm -rf "$T/w" && cp -r "$T/base" "$T/w"; }
        DLK_FAIL_ALLOC=$i timeout 60 "$F" "${args[@]}" >"$T/o" 2>"$T/e"
        rc=$?
        runs=$((runs + 1))
        why=
        if [ $rc -ge 124 ]; then
            why="killed or hung (exit $rc)"
        elif [ $rc -ne 0 ] && { [ $rc -ne 3 ] || ! grep -Eq "out of memory|cannot allocate" "$T/e"; }; then
            why="exit $rc: $(head -c 200 "$T/e")"
        elif [ "$writer" = 1 ] && ! "$DLK" verify "$T/w" >/dev/null 2>"$T/ve"; then
            why="verify fails after it: $(head -c 200 "$T/ve")"
        elif [ "$writer" = 1 ] && ! eval "$after"; then
            why="after it: $(rows "$T/w") rows; $("$DLK" log "$T/w" 2>&1 | head -c 120)"
        fi
        if [ -n "$why" ]; then
            bad=$((bad + 1))
            [ $bad -le 5 ] && echo "#   $name, allocation $i failing: $why"
        fi
    done
    echo "# $name: $n allocations, $runs runs"
    check "$name: every run through a failed allocation ends cleanly ($runs runs of $n)" test "$bad" = 0 -a "$n" -gt 0
}

sweep "ls" 0 true ls "$T/base"
sweep "cat --npy" 0 true cat "$T/base" images 3 --npy
sweep "verify --deep" 0 true verify "$T/base" --deep
sweep "bench-stream --device cpu" 0 true bench-stream "$T/base" --device cpu --epochs 2 --batch-size 16 --json
sweep "ingest of 20 keyed rows" 1 'case $(rows "$T/w") in 40|60) true ;; *) false ;; esac' \
    ingest @W@ from-dir "$T/src2" --quiet
sweep "commit" 1 '[ "$("$DLK" log "$T/w" --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")" -ge 1 ]' \
    commit @W@ -m second
sweep "query --save-view" 1 'test "$(rows "$T/w")" = 40' query @W@ "labels < 3" --save-view low
