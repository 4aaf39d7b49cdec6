#!/usr/bin/env bash
# t344-gcs-hostile.sh - t305's hostile servers for gs://: an ingest
# from-gs through tests/faultproxy.py --hostile in front of
# fake-gcs-server.  A page token that repeats, a listing that never ends,
# an object trickled at 2 bytes a second, a claimed Content-Length of
# 1 GiB - 1, a body longer than listed: each ends in a clear error (exit
# 3) within a bounded time, naming the prefix or the key; SIGTERM during
# a trickled listing and a trickled GET ends the run within seconds, exit
# 143.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/gcslib.sh"
gcs_need "hostile gcs servers"
gcs_start
gcs_mkbucket raw
L=$T/lab
mkdir -p "$L"
for i in $(seq -w 0 19); do echo $((10#$i % 3)) > "$L/$i.cls"; done
gcs_put_tree "$L" gs://raw/lab

through_proxy() { # ARGS...: a proxy with ARGS in front of the emulator
    gcs_proxy_start "$@"
    PROXY=127.0.0.1:$GCS_PROXY_PORT
}

# create [ulimit -v KiB] ENV...: a create of a new local dataset from
# gs://raw/lab through the proxy, bounded to 60 s (lib.sh)
n=0
create() {
    local vm=()
    if [ "${1:-}" = ulimit ]; then
        # AddressSanitizer maps terabytes of shadow: no address space limit
        grep -q __asan_init "$DLK" || vm=("$1" "$2" "$3")
        shift 3
    fi
    n=$((n + 1))
    bounded 60 "${vm[@]}" env STORAGE_EMULATOR_HOST="$PROXY" "$@" "$DLK" \
        create "$T/ds$n" from-gs gs://raw/lab --order sorted --json
}

through_proxy --hostile list-repeat
create DLK_S3_MAX_ATTEMPTS=2
check "repeated token: exit 3 (exit $RC after ${SECS}s)" test "$RC" -eq 3
check "repeated token: within 20 s" test "$SECS" -le 20
check "repeated token: says so, naming the prefix" \
    grep -q "cannot list 'gs://raw/lab/': the server sent a page token it had sent before" "$ERR"
check "repeated token: RSS under 200 MiB ($RSS KiB)" test "$RSS" -lt 204800

through_proxy --hostile list-fresh
create DLK_S3_LIST_MAX_PAGES=50
check "endless listing: exit 3 (exit $RC after ${SECS}s)" test "$RC" -eq 3
check "endless listing: the page cap, naming the prefix" \
    grep -q "cannot list 'gs://raw/lab/': more than 50 pages (DLK_S3_LIST_MAX_PAGES)" "$ERR"
create DLK_S3_LIST_MAX_KEYS=100
check "endless listing, key cap: exit 3 (exit $RC)" test "$RC" -eq 3
check "endless listing: the key cap" \
    grep -q "cannot list 'gs://raw/lab/': more than 100 keys (DLK_S3_LIST_MAX_KEYS)" "$ERR"

through_proxy --hostile trickle
create DLK_S3_STALL_SECONDS=2 DLK_S3_MAX_ATTEMPTS=2
check "trickle: exit 3 (exit $RC after ${SECS}s)" test "$RC" -eq 3
check "trickle: within 20 s" test "$SECS" -le 20
check "trickle: names the key" grep -q "gs://raw/lab/00.cls" "$ERR"

through_proxy --hostile claim
create ulimit -v 4194304 DLK_S3_MAX_ATTEMPTS=2
check "claimed length: exit 3 (exit $RC)" test "$RC" -eq 3
check "claimed length: refused by the listed size, naming the key" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
e = d.get("errors") or []
assert len(e) == 20, d
assert all("over the limit of 2 (the size its listing gave)" in x["reason"]
           and x["reason"].startswith("object %s" % repr("gs://raw/lab/" + x["key"]))
           for x in e), e' "$OUT"

through_proxy --hostile longer
create
check "longer body: exit 3 (exit $RC)" test "$RC" -eq 3
check "longer body: every row refused by the listed size" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
e = d.get("errors") or []
assert d.get("ingested", 0) == 0 and len(e) == 20, d
assert all("(the size its listing gave)" in x["reason"] for x in e), e' "$OUT"

sigterm_create() { # NAME
    n=$((n + 1))
    sigterm_after 2 "$1" env STORAGE_EMULATOR_HOST="$PROXY" "$DLK" create \
        "$T/ds$n" from-gs gs://raw/lab --order sorted
}
through_proxy --hostile trickle --hostile-path '/o[?]'
sigterm_create "SIGTERM during a trickled listing"
through_proxy --hostile trickle
sigterm_create "SIGTERM during a trickled GET"
# and during the rows' GETs of an ingest into a dataset (no inference):
# the run stops as interrupted, keeping what it had
mkdir -p "$T/other"
for i in $(seq -w 0 9); do echo 2 > "$T/other/x$i.cls"; done
ok "a local dataset of other rows" "$DLK" create "$T/base" from-dir \
    "$T/other" --order sorted --quiet
sigterm_after 2 "SIGTERM during an ingest's trickled GETs" env STORAGE_EMULATOR_HOST="$PROXY" \
    "$DLK" ingest "$T/base" from-gs gs://raw/lab --order sorted
check "the ingest says it was interrupted" grep -q "^interrupted: " "$ERR"
ok "the dataset still verifies" "$DLK" verify "$T/base"
