#!/usr/bin/env bash
# t470-cache-s3.sh - the node-local chunk cache (bench-stream --cache-dir)
# in front of an S3 server (moto), GETs counted by the server's own log:
# epochs after the first and a second run make no chunk GET; 2, then 4,
# processes streaming at once through one cache fetch each chunk once; a
# cache smaller than the dataset evicts and stays within its limit; a
# damaged copy is found, removed and fetched again; a temp file a killed
# process left (its lock released) is fetched over; a folder that cannot
# be made streams as without a cache, with one warning.  bench-stream's
# label-mix audit reads the class tensor itself, beside the loader and
# its cache, once a run: its GETs are not counted here.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

if ! have_numpy; then
    skip "the chunk cache over S3" "no numpy"
    exit 0
fi
s3_start
s3_mkbucket dlk-t470
MOTO_LOG=$(ls "$T"/moto-*.log)
python3 - "$T/src" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(470)
for i in range(1200):
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            rng.integers(0, 255, size=(24, 24, 3), dtype=np.uint8))
    np.save(os.path.join(sys.argv[1], "%05d.labels.npy" % i),
            np.int32(i % 10))
PY
ds=s3://dlk-t470/ds
ok "create" dlk create "$ds" --tensor images:u8:24x24x3 \
    --tensor labels:i32 --chunk-size 64K
ok "ingest 1200 samples" dlk ingest "$ds" from-dir "$T/src" -q
NCHUNKS=$(python3 - "$AWS_ENDPOINT_URL" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
n = 0
for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket="dlk-t470", Prefix="ds/chunks/"):
    n += len([o for o in page.get("Contents", [])
              if not o["Key"].startswith("ds/chunks/labels/")])
print(n)
PY
)
NLABELS=$(dlk ls "$ds" --json | python3 -c 'import json, sys
print([t for t in json.load(sys.stdin)["tensors"] if t["name"] == "labels"][0]["chunks"])')
check "the dataset has chunks ($NCHUNKS and $NLABELS of labels)" \
    test "$NCHUNKS" -gt 10 -a "$NLABELS" -ge 1
ALL=$((NCHUNKS + NLABELS))

# chunk GETs the server answered so far, but the labels'
gets() { grep '"GET /dlk-t470/ds/chunks/' "$MOTO_LOG" | grep -vc /labels/; }
stream() { # NAME CACHE ARGS...
    local name=$1 dir=$2; shift 2
    ok "$name" "$DLK" bench-stream "$ds" --device cpu --json --shuffle \
        --seed 5 --batch-size 100 --workers 4 --cache-dir "$dir" "$@"
    check "$name: checksum_ok" test "$(json_field checksum_ok)" = True
}

C=$T/cache
g0=$(gets)
stream "3 epochs through an empty cache" "$C" --epochs 3
g1=$(gets)
check "each chunk fetched once ($((g1 - g0)) GETs, $NCHUNKS chunks)" \
    test $((g1 - g0)) -eq "$NCHUNKS"
check "epochs 2 and 3 made no request" \
    test "$(json_field epochs.1.requests)/$(json_field epochs.2.requests)" = 0/0
check "the loader fetched $ALL chunks into the cache" \
    test "$(json_field cache.fetched)" -eq "$ALL"
check "one copy a chunk in objects/" \
    test "$(ls "$C/objects" | wc -l)" -eq "$ALL"
check "no temp file left" test -z "$(ls "$C/tmp")"
stream "a second run through the full cache" "$C" --epochs 1
check "a second run: no chunk GET" test "$(gets)" -eq "$g1"
check "a second run: reads from copies, nothing fetched" \
    test "$(json_field cache.fetched)" = 0 -a "$(json_field cache.hits)" -gt 0

# processes at once: the same order, so they want each chunk together
at_once() { # N DIR
    local n=$1 dir=$2 i pids=() bad=0
    local before; before=$(gets)
    for ((i = 0; i < n; i++)); do
        "$DLK" bench-stream "$ds" --device cpu --json --shuffle --seed 5 \
            --batch-size 100 --workers 4 --cache-dir "$dir" \
            >"$T/p$i.json" 2>"$T/p$i.err" &
        pids+=($!)
    done
    for ((i = 0; i < n; i++)); do
        wait "${pids[$i]}" || bad=1
    done
    check "$n processes at once: all ran, checksums equal" test $bad = 0
    local after; after=$(gets)
    check "$n processes at once: each chunk fetched once ($((after - before)) GETs, $NCHUNKS chunks)" \
        test $((after - before)) -eq "$NCHUNKS"
    local sum=0
    for ((i = 0; i < n; i++)); do
        sum=$((sum + $(json_field cache.fetched "$T/p$i.json")))
    done
    check "$n processes at once: fetched $sum in all, once a chunk" \
        test "$sum" -eq "$ALL"
}
at_once 2 "$T/cache2"
at_once 4 "$T/cache4"

# smaller than the dataset: 40% of the chunks' bytes
total=$(du -b --apparent-size -s "$C/objects" | cut -f1)
lim=$((total * 2 / 5))
g0=$(gets)
stream "2 epochs through a cache of $lim bytes" "$T/small" --epochs 2 \
    --cache-limit "$lim"
held=$(du -b --apparent-size -s "$T/small/objects" | cut -f1)
check "within the limit ($held of $lim bytes)" test "$held" -le "$lim"
check "copies were evicted ($(json_field cache.evicted))" \
    test "$(json_field cache.evicted)" -gt 0
check "the second epoch fetched again ($(json_field epochs.1.requests) requests)" \
    test "$(json_field epochs.1.requests)" -gt 0
check "the limit is reported" test "$(json_field cache.limit)" -eq "$lim"

# a damaged copy: one byte flipped
victim=$(ls "$C/objects" | head -n 1)
cp "$C/objects/$victim" "$T/good"
flip_byte "$C/objects/$victim" 100
g0=$(gets)
stream "a run over a damaged copy" "$C" --epochs 1
check "the damaged copy was dropped" test "$(json_field cache.dropped)" = 1
check "and fetched again: one chunk GET ($(( $(gets) - g0 )))" \
    test $(( $(gets) - g0 )) -eq 1
check "the copy is whole again" cmp "$C/objects/$victim" "$T/good"
# a copy cut short: its size tells
truncate -s 10 "$C/objects/$victim"
stream "a run over a copy cut short" "$C" --epochs 1
check "the short copy was dropped and fetched again" \
    test "$(json_field cache.dropped)/$(json_field cache.fetched)" = 1/1

# a process killed while it fetched: its temp file, locked until it
# died, holds part of a chunk; the next process fetches it over
rm "$C/objects/$victim"
python3 - "$C/tmp/$victim" <<'PY' &
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b"part of a chunk")
time.sleep(600)
PY
holder=$!
at_exit "kill -9 $holder 2>/dev/null"
for _ in $(seq 50); do [ -s "$C/tmp/$victim" ] && break; sleep 0.1; done
"$DLK" bench-stream "$ds" --device cpu --json --shuffle --seed 5 \
    --batch-size 100 --workers 4 --cache-dir "$C" >"$T/killed.json" \
    2>"$T/killed.err" &
streamer=$!
sleep 1
check "a reader waits while the lock is held" kill -0 $streamer
kill -9 $holder
wait $holder 2>/dev/null
wait $streamer
check "after the holder was killed, the reader went on" test $? -eq 0
check "and fetched the chunk" test "$(json_field cache.fetched "$T/killed.json")" = 1
check "the fetched copy is whole" cmp "$C/objects/$victim" "$T/good"
check "no temp file left" test -z "$(ls "$C/tmp")"
# a temp file no process holds is removed when a cache opens
echo junk >"$C/tmp/0123456789abcdef0123456789abcdef"
stream "a run over a stale temp file" "$C" --epochs 1
check "the stale temp file was removed" test -z "$(ls "$C/tmp")"

# a folder that cannot be made (below a plain file): as without a cache
echo x >"$T/plain"
g0=$(gets)
stream "a cache folder that cannot be made" "$T/plain/cache" --epochs 2
check "one warning" test "$(grep -c 'warning: chunk cache' "$ERR")" = 1
check "it names the folder and why" \
    grep -q "chunk cache '$T/plain/cache' not written: cannot make the folder: Not a directory" "$ERR"
check "the warning is in the report" \
    test "$(json_field cache.warning)" != None
check "nothing fetched into a cache" test "$(json_field cache.fetched)" = 0
check "both epochs read the store ($(( $(gets) - g0 )) GETs)" \
    test $(( $(gets) - g0 )) -ge $((2 * NCHUNKS))
# DLK_CACHE_DIR is the default; --cache-dir '' turns it off
g0=$(gets)
ok "DLK_CACHE_DIR as the default" env DLK_CACHE_DIR="$C" "$DLK" \
    bench-stream "$ds" --device cpu --json
check "DLK_CACHE_DIR: no chunk GET" test "$(gets)" -eq "$g0"
check "the report's settings name the folder" \
    test "$(json_field settings.cache_dir)" = "$C"
ok "--cache-dir '' overrides it" env DLK_CACHE_DIR="$C" "$DLK" \
    bench-stream "$ds" --device cpu --json --cache-dir ''
check "--cache-dir '': no cache" test "$(json_field cache)" = None
fails "a bad DLK_CACHE_LIMIT is a usage error" 2 env DLK_CACHE_LIMIT=lots \
    "$DLK" bench-stream "$ds" --device cpu
check "it names the variable" grep -q DLK_CACHE_LIMIT "$ERR"
