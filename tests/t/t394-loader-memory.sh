#!/usr/bin/env bash
# t394-loader-memory.sh - the loader's memory is bounded by its flags, not
# by the dataset: streaming datasets of 0.6 and 1.1 GiB (16 MiB chunks)
# with --window 2 --prefetch 4 keeps the chunk buffers at (2+4) chunks and
# the peak RSS under that + 512 MiB, the same for both sizes; and in a
# cgroup whose memory limit is lower than the budget the flags ask for,
# the budget shrinks to half the limit and the run completes inside it,
# and two ranks of the host in it share that half.
# On a GPU (when there is one) the same bound by default, and the page
# cache pinned past it with --pin-cache auto.
. "$DLK_TESTS/lib.sh"

synth=$DLK_BUILD/tests/synth
if [ ! -x "$synth" ]; then
    skip "loader memory bound" "no $synth (make unit builds it)"
    exit 0
fi
ok "a 0.6 GiB dataset" "$synth" "$T/small" 4000 224 224
ok "a 1.1 GiB dataset" "$synth" "$T/big" 8000 224 224

MiB=1048576
chunk=$((16 * MiB))
# stream DATASET NAME ARGS...: bench-stream's JSON report into $T/NAME.json
stream() {
    local ds=$1 name=$2; shift 2
    ok "$name" sh -c '"$@" > "$0"' "$T/$name.json" \
        "$DLK" bench-stream "$ds" --device cpu --shuffle --epochs 2 --json "$@"
}
field() { # NAME KEY
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
        "$T/$1.json" "$2"
}

stream "$T/small" small --window 2 --prefetch 4
stream "$T/big" big --window 2 --prefetch 4
check "the cpu pins nothing" test "$(field small pin_s)" = 0.0
for n in small big; do
    check "$n: every checksum equal" test "$(field $n checksum_ok)" = True
    check "$n: chunk buffers within (2+4) chunks" \
        test "$(field $n peak_buffer_bytes)" -le $((6 * chunk))
done
check "the big dataset is larger than the bound (a real test)" \
    test "$(du -sb "$T/big" | cut -f1)" -gt $((6 * chunk + 512 * MiB))
if [ "${SAN:-}" = 1 ]; then
    skip "peak RSS within (2+4) chunks + 512 MiB" "ASan's shadow memory and quarantine"
else
    for n in small big; do
        check "$n: peak RSS within (2+4) chunks + 512 MiB" \
            test "$(field $n peak_rss_bytes)" -le $((6 * chunk + 512 * MiB))
    done
    check "peak RSS does not grow with the dataset (within 64 MiB)" \
        python3 -c 'import sys; a, b = map(int, sys.argv[1:]); sys.exit(abs(a - b) > 64 << 20)' \
        "$(field small peak_rss_bytes)" "$(field big peak_rss_bytes)"
fi

fails "--pin-cache that is not a size is a usage error" 2 \
    "$DLK" bench-stream "$T/small" --device cpu --pin-cache 12X
check "... naming the flag" grep -q -- "--pin-cache: '12X'" "$ERR"

# On a GPU: by default the chunk files are read into pinned buffers, so
# the same bound holds; --pin-cache auto keeps them mapped and pinned (the
# page cache counted in RSS: above the bound for the big dataset).
if "$DLK" bench-stream "$T/small" --device cuda:0 --epochs 1 --json \
        >"$T/probe.json" 2>"$T/probe.err"; then
    stream "$T/small" gpu-small --window 2 --prefetch 4 --device cuda:0
    stream "$T/big" gpu-big --window 2 --prefetch 4 --device cuda:0
    stream "$T/big" gpu-pinned --window 2 --prefetch 4 --device cuda:0 \
        --pin-cache auto
    for n in gpu-small gpu-big gpu-pinned; do
        check "$n: every checksum equal" test "$(field $n checksum_ok)" = True
    done
    check "gpu-pinned: the pinning's seconds counted, within the I/O threads'" \
        python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
assert 0 < d["pin_s"] <= d["io_busy_s"] + 1e-6, (d["pin_s"], d["io_busy_s"])
h, first = d["hint"], d["time_split"]["wait_first_epoch_pct"]
assert first < 50 or h["flag"] == "" and "pin the page cache" in h["why"], h
assert h["flag"] != "a faster store", h' "$T/gpu-pinned.json"
    check "gpu-big: no pinning of the page cache without --pin-cache" \
        test "$(field gpu-big pin_s)" = 0.0
    check "... no chunk pinned" test "$(field gpu-big chunks_pinned)" = 0
    check "gpu-pinned: chunks pinned, each once" python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
n = sum(t["chunks"] for t in d["dataset_info"]["tensors"])
assert 1 <= d["chunks_pinned"] <= n, (d["chunks_pinned"], n)' "$T/gpu-pinned.json"
    if [ "${SAN:-}" != 1 ]; then
        for n in gpu-small gpu-big; do
            check "$n: peak RSS within (2+4) chunks + 512 MiB" \
                test "$(field $n peak_rss_bytes)" -le $((6 * chunk + 512 * MiB))
        done
        check "gpu-pinned: the pinned page cache shows in the RSS" \
            test "$(field gpu-pinned peak_rss_bytes)" -gt $((6 * chunk + 512 * MiB))
    fi
else
    skip "bench-stream on a GPU within the bound, and with --pin-cache" \
        "no GPU here: $(tail -n 1 "$T/probe.err")"
fi

# A memory cgroup of 600 MiB (v1 or v2, where this user may make one).
cg=""
limit=$((600 * MiB))
if [ -w /sys/fs/cgroup/memory ] && mkdir "/sys/fs/cgroup/memory/dlk-t394-$$" 2>/dev/null; then
    cg=/sys/fs/cgroup/memory/dlk-t394-$$
    echo "$limit" > "$cg/memory.limit_in_bytes" 2>/dev/null || cg=""
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
     mkdir "/sys/fs/cgroup/dlk-t394-$$" 2>/dev/null; then
    cg=/sys/fs/cgroup/dlk-t394-$$
    echo "$limit" > "$cg/memory.max" 2>/dev/null || cg=""
fi
if [ -z "$cg" ]; then
    skip "bench-stream inside a 600 MiB memory cgroup" "cannot make a memory cgroup here (needs root and a writable cgroup fs)"
    exit 0
fi
at_exit rmdir "$cg"
# --window 2 --prefetch 64 asks for (2+64) x 16 MiB = 1.1 GiB of buffers;
# a 20 ms step keeps the consumer behind the reads, so the budget binds
ok "--prefetch 64 inside a 600 MiB cgroup" sh -c 'echo $$ > "$1/cgroup.procs" && exec "$2" bench-stream "$3" --device cpu --shuffle --epochs 2 --window 2 --prefetch 64 --step-ms 20 --json > "$4"' \
    sh "$cg" "$DLK" "$T/big" "$T/cg.json"
check "in the cgroup: every checksum equal" test "$(field cg checksum_ok)" = True
check "in the cgroup: chunk buffers within half the limit" \
    test "$(field cg peak_buffer_bytes)" -le $((limit / 2))
check "in the cgroup: the budget was reached (over a quarter of the limit)" \
    test "$(field cg peak_buffer_bytes)" -gt $((limit / 4))
if [ "${SAN:-}" != 1 ]; then
    check "in the cgroup: peak RSS within the limit" \
        test "$(field cg peak_rss_bytes)" -le "$limit"
fi

# Two ranks of one host in the same cgroup share its memory: each takes a
# quarter of the limit, not half.  Each taking half, a 60 ms step let both
# reach it, and the cgroup killed one of them.
for r in 0 1; do
    sh -c 'echo $$ > "$1/cgroup.procs" && RANK=$5 WORLD_SIZE=2 LOCAL_RANK=$5 LOCAL_WORLD_SIZE=2 exec "$2" bench-stream "$3" --device cpu --shuffle --epochs 2 --window 2 --prefetch 64 --step-ms 60 --json > "$4"' \
        sh "$cg" "$DLK" "$T/big" "$T/cg-rank$r.json" $r \
        >"$T/cg-rank$r.out" 2>"$T/cg-rank$r.err" &
    pids[r]=$!
done
for r in 0 1; do
    ok "rank $r of 2 inside the same 600 MiB cgroup" wait "${pids[r]}"
    check "in the cgroup, rank $r of 2: every checksum equal" \
        test "$(field cg-rank$r checksum_ok)" = True
    check "in the cgroup, rank $r of 2: chunk buffers within a quarter of the limit" \
        test "$(field cg-rank$r peak_buffer_bytes)" -le $((limit / 4))
done
check "in the cgroup, ranks of 2: each read half the samples" \
    python3 -c 'import json, sys; a, b = (json.load(open(f))["samples"] for f in sys.argv[1:]); sys.exit(not (a == b == 2 * 4000))' \
    "$T/cg-rank0.json" "$T/cg-rank1.json"
