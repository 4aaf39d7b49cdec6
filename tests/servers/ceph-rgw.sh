#!/usr/bin/env bash
# tests/servers/ceph-rgw.sh - a one-node Ceph cluster with RADOS Gateway on
# loopback, from the Debian packages of this machine (ceph-mon, ceph-osd,
# radosgw): one monitor, one BlueStore OSD on a sparse file, one RGW, no
# manager, no cephx, no containers.
#
#   ceph-rgw.sh start DIR   start it under DIR (created; must be empty or
#                           absent); on success prints, and writes to
#                           DIR/env, the lines
#                             RGW_ENDPOINT=http://127.0.0.1:PORT
#                             RGW_ACCESS_KEY=... RGW_SECRET_KEY=...
#                           (an S3 user made with radosgw-admin); exit 0.
#                           On failure: everything started is stopped, the
#                           reason is on stderr and in DIR/failed; exit 1.
#   ceph-rgw.sh stop DIR    stop what start started (by the pid files)
#
# It takes ~15-20 s and ~0.5 GB of memory; the OSD's file is sparse
# (10 GiB apparent, what is written on disk).
set -u
here=$(cd "$(dirname "$0")" && pwd)

die() {
    echo "ceph-rgw: $*" >&2
    [ -n "${D:-}" ] && [ -d "$D" ] && echo "$*" >"$D/failed"
    [ -n "${D:-}" ] && stop_all
    exit 1
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_all() {
    local f pid i
    for f in "$D"/run/rgw.pid "$D"/run/osd.0.pid "$D"/run/mon.a.pid; do
        [ -s "$f" ] || continue
        pid=$(cat "$f")
        kill "$pid" 2>/dev/null || continue
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null
    done
    rm -f "$D"/osd.block
}

# wait_for SECONDS CMD...: until CMD succeeds
wait_for() {
    local n=$(( $1 * 10 )) i
    shift
    for ((i = 0; i < n; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

start() {
    local b
    for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do
        command -v "$b" >/dev/null 2>&1 ||
            { echo "ceph-rgw: '$b' is missing: apt-get install ceph-mon ceph-osd radosgw ceph-common" >&2
              mkdir -p "$D" && echo "'$b' is missing (apt-get install ceph-mon ceph-osd radosgw ceph-common)" >"$D/failed"
              exit 1; }
    done
    mkdir -p "$D" || exit 1
    [ -z "$(ls -A "$D")" ] || { echo "ceph-rgw: '$D' is not empty" >&2; exit 1; }
    mkdir -p "$D"/run "$D"/log "$D"/mon "$D"/osd "$D"/tmp
    local fsid mon_port rgw_port
    fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
    mon_port=$(free_port)
    rgw_port=$(free_port)
    # Sized for a test machine: small PG counts (RGW makes ~8 pools and one
    # OSD holds them all), small caches, one copy of everything.
    cat >"$D/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_port]
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
# radosgw asks for a "secure" mon connection, which needs cephx: crc
ms mon client mode = crc
ms client mode = crc
run dir = $D/run
admin socket = $D/run/\$name.asok
log file = $D/log/\$name.log
pid file = $D/run/\$name.pid
keyring = $D/keyring
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0
mon data avail warn = 1
mon data avail crit = 0
[mon]
mon data = $D/mon
[osd]
osd data = $D/osd
osd objectstore = bluestore
bluestore block path = $D/osd.block
bluestore block create = true
bluestore block size = 10737418240
bluestore block db create = false
bluestore block wal create = false
osd memory target = 536870912
bluestore cache autotune = false
bluestore cache size = 67108864
osd op num shards = 1
osd op num threads per shard = 2
osd max object name len = 256
[client.rgw]
# tcp_nodelay: without it every small answer waits ~40 ms for Nagle's
# algorithm and the client's delayed ACK (a GET: 47 ms, with it 1.5 ms)
rgw frontends = beast endpoint=127.0.0.1:$rgw_port tcp_nodelay=1
rgw data = $D/rgw
rgw enable usage log = false
rgw thread pool size = 64
CONF
    local C=(-c "$D/ceph.conf")
    monmaptool --create --addv a "[v2:127.0.0.1:$mon_port]" --fsid "$fsid" \
        "$D/monmap" >"$D/log/setup.log" 2>&1 || die "monmaptool failed: $(tail -n 3 "$D/log/setup.log")"
    ceph-mon "${C[@]}" --mkfs -i a --monmap "$D/monmap" \
        >>"$D/log/setup.log" 2>&1 || die "ceph-mon --mkfs failed: $(tail -n 3 "$D/log/setup.log")"
    ceph-mon "${C[@]}" -i a >>"$D/log/setup.log" 2>&1 ||
        die "ceph-mon did not start: $(tail -n 3 "$D/log/setup.log")"
    wait_for 30 timeout 5 ceph "${C[@]}" --connect-timeout 3 mon stat ||
        die "the monitor does not answer (see $D/log/mon.a.log)"
    local uuid id
    uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
    id=$(timeout 20 ceph "${C[@]}" osd new "$uuid" 2>>"$D/log/setup.log") ||
        die "ceph osd new failed: $(tail -n 3 "$D/log/setup.log")"
    [ "$id" = 0 ] || die "the new OSD got id '$id', not 0"
    ceph-osd "${C[@]}" -i 0 --mkfs --osd-uuid "$uuid" \
        >>"$D/log/setup.log" 2>&1 || die "ceph-osd --mkfs failed: $(tail -n 3 "$D/log/setup.log")"
    ceph-osd "${C[@]}" -i 0 >>"$D/log/setup.log" 2>&1 ||
        die "ceph-osd did not start: $(tail -n 3 "$D/log/setup.log")"
    wait_for 60 sh -c "timeout 5 ceph -c '$D/ceph.conf' --connect-timeout 3 osd dump 2>/dev/null | grep -q '^osd.0 up'" ||
        die "the OSD did not come up (see $D/log/osd.0.log)"
    # in the foreground of a background job: its pid is known at once
    radosgw "${C[@]}" -n client.rgw -f >>"$D/log/setup.log" 2>&1 </dev/null &
    echo $! >"$D/run/rgw.pid"
    wait_for 60 curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$rgw_port/" ||
        die "radosgw does not answer on port $rgw_port (see $D/log/client.rgw.log)"
    local keys
    keys=$(timeout 60 radosgw-admin "${C[@]}" user create --uid=dlk --display-name=dlk \
           2>>"$D/log/setup.log" | python3 -c '
import json, sys
k = json.load(sys.stdin)["keys"][0]
print(k["access_key"], k["secret_key"])') ||
        die "radosgw-admin user create failed: $(tail -n 3 "$D/log/setup.log")"
    {
        echo "RGW_ENDPOINT=http://127.0.0.1:$rgw_port"
        echo "RGW_ACCESS_KEY=${keys% *}"
        echo "RGW_SECRET_KEY=${keys#* }"
    } >"$D/env"
    cat "$D/env"
}

case ${1:-} in
start) [ $# = 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }
       D=$2; start ;;
stop) [ $# = 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
      D=$2; stop_all ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
