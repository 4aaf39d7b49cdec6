#!/usr/bin/env bash
# t305-s3-hostile.sh - an ingest from-s3 through tests/faultproxy.py
# --hostile, as a broken or hostile server answers: a listing whose
# continuation token repeats, or never ends; an object's answer trickled
# at 2 bytes a second; a Content-Length of 1 GiB - 1 for an object listed
# at 2 bytes; a body longer than the listing gave.  Each run ends in a
# clear error (exit 3) within a bounded time and bounded memory, naming
# the prefix or the key; SIGTERM during a trickled listing and during a
# trickled GET ends the run within seconds, exit 143.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

s3_start
s3_mkbucket raw
L=$T/lab
mkdir -p "$L"
for i in $(seq -w 0 19); do echo $((10#$i % 3)) > "$L/$i.cls"; done
s3_put_tree "$L" s3://raw/lab

# create [ulimit -v KiB] ENV...: a create of a new local dataset from
# s3://raw/lab through the proxy, bounded to 60 s (lib.sh)
n=0
create() {
    local vm=()
    if [ "${1:-}" = ulimit ]; then
        # AddressSanitizer maps terabytes of shadow: no address space limit
        grep -q __asan_init "$DLK" || vm=("$1" "$2" "$3")
        shift 3
    fi
    n=$((n + 1))
    bounded 60 "${vm[@]}" env AWS_ENDPOINT_URL="$PROXY" "$@" "$DLK" create \
        "$T/ds$n" from-s3 s3://raw/lab --order sorted --json
}

# through_proxy ARGS...: a proxy with ARGS; dlk reaches moto through it
through_proxy() {
    s3_proxy_start "$@"
    PROXY=http://127.0.0.1:$S3_PROXY_PORT
}

# a repeated continuation token: an error naming the prefix, at once
through_proxy --hostile list-repeat
create DLK_S3_MAX_ATTEMPTS=2
check "repeated token: exit 3 (exit $RC after ${SECS}s)" test "$RC" -eq 3
check "repeated token: within 20 s" test "$SECS" -le 20
check "repeated token: says so, naming the prefix" \
    grep -q "cannot list 's3://raw/lab/': the server sent a continuation token it had sent before" "$ERR"
check "repeated token: two listing pages asked for" \
    test "$(grep -c '^fault hostile-list-repeat ' "$S3_PROXY_LOG")" -le 3
check "repeated token: RSS under 200 MiB ($RSS KiB)" test "$RSS" -lt 204800

# a listing that never ends (a new token every page): the page cap, then
# the key cap
through_proxy --hostile list-fresh
create DLK_S3_LIST_MAX_PAGES=50
check "endless listing: exit 3 (exit $RC after ${SECS}s)" test "$RC" -eq 3
check "endless listing: the page cap, naming the prefix" \
    grep -q "cannot list 's3://raw/lab/': more than 50 pages (DLK_S3_LIST_MAX_PAGES)" "$ERR"
check "endless listing: 50 pages asked for" \
    test "$(grep -c '^fault hostile-list-fresh ' "$S3_PROXY_LOG")" -le 51
create DLK_S3_LIST_MAX_KEYS=100
check "endless listing, key cap: exit 3 (exit $RC)" test "$RC" -eq 3
check "endless listing: the key cap" \
    grep -q "cannot list 's3://raw/lab/': more than 100 keys (DLK_S3_LIST_MAX_KEYS)" "$ERR"

# a body trickled at 2 B/s: the stall bound cuts it (2 s here), and after
# the attempts the GET fails naming the key
through_proxy --hostile trickle
create DLK_S3_STALL_SECONDS=2 DLK_S3_MAX_ATTEMPTS=2
check "trickle: exit 3 (exit $RC after ${SECS}s)" test "$RC" -eq 3
check "trickle: within 20 s" test "$SECS" -le 20
check "trickle: names the key" grep -q "s3://raw/lab/00.cls" "$ERR"
# above the stall rate, but never done: the deadline of an attempt
create DLK_S3_STALL_RATE=1 DLK_S3_REQUEST_TIMEOUT=2 \
    DLK_S3_MAX_ATTEMPTS=2
check "trickle over the stall rate: exit 3 by the deadline (exit $RC after ${SECS}s)" \
    test "$RC" -eq 3 -a "$SECS" -le 20
check "trickle over the stall rate: names the key" \
    grep -q "s3://raw/lab/00.cls" "$ERR"

# 1 GiB - 1 claimed for objects listed at 2 bytes: refused before anything
# is reserved (an address space of 4 GiB could not hold twenty such
# buffers), each row skipped naming its key and the listed size
through_proxy --hostile claim
create ulimit -v 4194304 DLK_S3_MAX_ATTEMPTS=2
check "claimed length: exit 3 (exit $RC)" test "$RC" -eq 3
check "claimed length: refused by the listed size, naming the key" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
e = d.get("errors") or []
assert len(e) == 20, d
assert all("over the limit of 2 (the size its listing gave)" in x["reason"]
           and x["reason"].startswith("object %s" % repr("s3://raw/lab/" + x["key"]))
           for x in e), e' "$OUT"

# a body 1000 bytes longer than listed: the fetch fails naming the key,
# never a row made of the longer body
through_proxy --hostile longer
create
check "longer body: exit 3 (exit $RC)" test "$RC" -eq 3
check "longer body: every row refused by the listed size" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
e = d.get("errors") or []
assert d.get("ingested", 0) == 0 and len(e) == 20, d
assert all("(the size its listing gave)" in x["reason"] for x in e), e' "$OUT"

# SIGTERM while the listing trickles, and while a GET trickles: exit 143
# within seconds
sigterm_create() { # NAME
    n=$((n + 1))
    sigterm_after 2 "$1" env AWS_ENDPOINT_URL="$PROXY" "$DLK" create \
        "$T/ds$n" from-s3 s3://raw/lab --order sorted
}
through_proxy --hostile trickle --hostile-path 'list-type=2'
sigterm_create "SIGTERM during a trickled listing"
through_proxy --hostile trickle
sigterm_create "SIGTERM during a trickled GET"
# and during the rows' GETs of an ingest into a dataset (no inference):
# the run stops as interrupted, keeping what it had
mkdir -p "$T/other"
for i in $(seq -w 0 9); do echo 2 > "$T/other/x$i.cls"; done
ok "a local dataset of other rows" "$DLK" create "$T/base" from-dir \
    "$T/other" --order sorted --quiet
sigterm_after 2 "SIGTERM during an ingest's trickled GETs" env AWS_ENDPOINT_URL="$PROXY" \
    "$DLK" ingest "$T/base" from-s3 s3://raw/lab --order sorted
check "the ingest says it was interrupted" grep -q "^interrupted: " "$ERR"
ok "the dataset still verifies" "$DLK" verify "$T/base"

# the other commands against S3 end on SIGTERM too (its default action)
s3_mkbucket lake
ok "a dataset on s3 (no proxy)" "$DLK" create s3://lake/ds from-s3 \
    s3://raw/lab --order sorted
through_proxy --hostile trickle
for c in "ls s3://lake/ds" "cat s3://lake/ds labels 3" \
         "bench-stream s3://lake/ds --device cpu --epochs 1"; do
    sigterm_after 2 "SIGTERM during a trickled $c" \
        env AWS_ENDPOINT_URL="$PROXY" "$DLK" $c
done
