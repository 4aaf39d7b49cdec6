# tests/lib.sh - helpers for the CLI test scripts in tests/t/.
#
#   . "$DLK_TESTS/lib.sh"
#   ok   "name" CMD...          CMD must exit 0
#   fails "name" CODE CMD...    CMD must exit with CODE (not a signal)
#   check "name" CMD...         like ok, for assertions (test, grep, cmp)
#   skip "name" "why"
# Each CMD's stdout/stderr land in $OUT and $ERR.  A command killed by a
# signal (exit >= 128) is always a failure: a crash never passes for an
# expected error.  $T is a fresh directory removed at exit.
set -u
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-test.XXXXXX")
OUT=$T/.stdout
ERR=$T/.stderr
_cleanups=()
at_exit() { _cleanups+=("$*"); }
_run_cleanups() {
    local c
    for c in "${_cleanups[@]+"${_cleanups[@]}"}"; do eval "$c"; done
    rm -rf "$T"
}
trap _run_cleanups EXIT

_report() { # name rc expected
    local name=$1 rc=$2 want=$3
    if [ "$rc" -ge 128 ] && [ "$want" -lt 128 ]; then
        echo "not ok - $name (killed by signal $((rc - 128)))"
    elif [ "$rc" -eq "$want" ]; then
        echo "ok - $name"
        return 0
    else
        echo "not ok - $name (exit $rc, expected $want)"
    fi
    sed 's/^/#   stderr: /' "$ERR" | head -n 15
    return 1
}

ok() {
    local name=$1; shift
    "$@" >"$OUT" 2>"$ERR"
    _report "$name" $? 0
}

fails() {
    local name=$1 want=$2; shift 2
    "$@" >"$OUT" 2>"$ERR"
    _report "$name" $? "$want"
}

# Assertions read $OUT/$ERR of the previous command, so their own output
# goes elsewhere.
check() {
    local name=$1; shift
    "$@" >"$T/.check.out" 2>"$T/.check.err"
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "ok - $name"
        return 0
    fi
    echo "not ok - $name (exit $rc)"
    sed 's/^/#   /' "$T/.check.out" "$T/.check.err" | head -n 15
    sed 's/^/#   previous stdout: /' "$OUT" | head -n 10
    sed 's/^/#   previous stderr: /' "$ERR" | head -n 10
    return 1
}

skip() { echo "ok - $1 # SKIP $2"; }

dlk() { "$DLK" "$@"; }

# Python with numpy, for reading what dlk writes independently.
have_numpy() { python3 -c 'import numpy' 2>/dev/null; }

# WebDataset's shards: the tests that write them need webdataset, Pillow
# and numpy (a missing one fails the test, as the suite installs them);
# wds runs tests/wds_shards.py, their writer.
need_wds() {
    python3 -c 'import webdataset, PIL, numpy' 2>/dev/null || {
        echo "not ok - webdataset, Pillow and numpy (scripts/deps.sh --ensure test)"
        exit 1
    }
}
wds() { python3 "$DLK_TESTS/wds_shards.py" "$@"; }

# Dataset URLs: local by default; under DLK_TEST_STORE=s3 or gs (set by
# t390 and t340, which also start the server, export DLK_TEST_BUCKET and,
# for gs, GCS_ENDPOINT) the same tests run against s3:// or gs://.
ds_url() {
    if [ "${DLK_TEST_STORE:-file}" = s3 ] || [ "${DLK_TEST_STORE:-}" = gs ]; then
        echo "$DLK_TEST_STORE://$DLK_TEST_BUCKET/$(basename "$T")/$1"
    else
        echo "$T/$1"
    fi
}

[ "${DLK_TEST_STORE:-}" = gs ] && . "$DLK_TESTS/gcslib.sh"

# Copy an object of a dataset to a local file and back (to corrupt it).
obj_get() { # URL KEY FILE
    if [ "${DLK_TEST_STORE:-file}" = gs ]; then
        gcs_get "$1/$2" "$3"
    elif [ "${DLK_TEST_STORE:-file}" = s3 ]; then
        aws s3 cp --quiet --endpoint-url "$AWS_ENDPOINT_URL" "$1/$2" "$3"
    else
        cp "$1/$2" "$3"
    fi
}
obj_put() { # URL KEY FILE
    if [ "${DLK_TEST_STORE:-file}" = gs ]; then
        gcs_put "$3" "$1/$2"
    elif [ "${DLK_TEST_STORE:-file}" = s3 ]; then
        aws s3 cp --quiet --endpoint-url "$AWS_ENDPOINT_URL" "$3" "$1/$2"
    else
        cp "$3" "$1/$2.tmp" && mv "$1/$2.tmp" "$1/$2"
    fi
}

obj_rm() { # URL KEY
    case "${DLK_TEST_STORE:-file}" in
    gs) gcs_rm "$1/$2" ;;
    s3) aws s3 rm --quiet --endpoint-url "$AWS_ENDPOINT_URL" "$1/$2" ;;
    *) rm "$1/$2" ;;
    esac
}

# The key of the first chunk of a tensor, from `dlk ls`-independent JSON.
first_chunk_key() { # URL TENSOR
    local f=$T/.manifest.json
    obj_get "$1" staging/manifest.json "$f" &&
        python3 -c 'import json,sys
m=json.load(open(sys.argv[1]))
t=[t for t in m["tensors"] if t["name"]==sys.argv[2]][0]
print("chunks/%s/%s" % (t["name"], t["chunks"][0][0]))' "$f" "$2"
}

# Flip one byte of a file at an offset (negative: from the end).
stop_pid() { # PID: TERM, then KILL after 5 s
    kill "$1" 2>/dev/null
    local i
    for ((i = 0; i < 50; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$1" 2>/dev/null
}

# bounded SECONDS [ulimit -v KiB] CMD...: CMD under a time limit (and an
# address space limit), $OUT and $ERR as for ok; its exit status in RC
# (124: it ran out of time), its seconds in SECS, its peak RSS in RSS (KiB)
bounded() {
    local lim=$1 vm=unlimited t0=$SECONDS; shift
    if [ "${1:-}" = ulimit ]; then vm=$3; shift 3; fi
    /usr/bin/time -f %M -o "$T/.rss" timeout -k 5 "$lim" bash -c \
        'ulimit -v "$0"; exec "$@"' "$vm" "$@" >"$OUT" 2>"$ERR"
    RC=$?
    SECS=$((SECONDS - t0))
    RSS=$(tail -n 1 "$T/.rss" | grep -E '^[0-9]+$' || echo 0)
}

# sigterm_after SECONDS NAME CMD...: CMD in the background, SIGTERM after
# SECONDS; checks that it exits 143 within 5 s of the signal (after 15 s
# it is killed and the check fails)
sigterm_after() {
    local wait=$1 name=$2 i; shift 2
    "$@" >"$OUT" 2>"$ERR" &
    local pid=$!
    sleep "$wait"
    kill -TERM $pid
    local t0=$SECONDS
    for ((i = 0; i < 150; i++)); do
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    local secs=$((SECONDS - t0))
    if kill -0 $pid 2>/dev/null; then
        kill -KILL $pid
        wait $pid
        echo "not ok - $name: still running 15 s after SIGTERM"
        return 1
    fi
    wait $pid
    local rc=$?
    check "$name: exit 143 (exit $rc)" test "$rc" -eq 143 &&
        check "$name: within 5 s of the signal (${secs}s)" test "$secs" -le 5
}

# tests/faultproxy.py in front of UPSTREAM (a URL) with ARGS, stopped at
# exit: FAULT_PROXY_PORT, FAULT_PROXY_LOG (its log), FAULT_PROXY_PID.
fault_proxy_start() { # UPSTREAM ARGS...
    local up=$1 out=$T/proxy-$RANDOM
    shift
    python3 "$DLK_TESTS/faultproxy.py" --port 0 --upstream "$up" \
        "$@" >"$out.port" 2>"$out.log" &
    local pid=$! i
    at_exit "stop_pid $pid"
    for ((i = 0; i < 100; i++)); do
        [ -s "$out.port" ] && break
        sleep 0.1
    done
    FAULT_PROXY_PORT=$(head -n 1 "$out.port")
    FAULT_PROXY_LOG=$out.log
    FAULT_PROXY_PID=$pid
    if [ -z "$FAULT_PROXY_PORT" ]; then
        echo "not ok - faultproxy did not start"
        sed 's/^/#   /' "$out.log" | tail -n 20
        exit 1
    fi
}

# A C unit binary run against a server: its TAP lines (each name after
# "PREFIX: " when PREFIX is not empty), and a "not ok" when it was
# killed or failed without saying which check.
unit_tap() { # PREFIX BIN ENV...
    local pre=$1 bin=$2; shift 2
    env "$@" "$bin" >"$T/unit.out" 2>&1
    local rc=$? what
    what=${pre:+$pre: }$(basename "$bin")
    if [ -n "$pre" ]; then
        sed "s/^\(not ok\|ok\) - /\1 - $pre: /" "$T/unit.out"
    else
        cat "$T/unit.out"
    fi
    if [ $rc -ge 128 ]; then
        echo "not ok - $what killed by signal $((rc - 128))"
    elif [ $rc -ne 0 ] && ! grep -q '^not ok' "$T/unit.out"; then
        echo "not ok - $what exited with $rc"
    fi
}

flip_byte() { # FILE OFFSET
    python3 -c 'import sys
p,o=sys.argv[1],int(sys.argv[2])
b=bytearray(open(p,"rb").read()); b[o]^=0x5a; open(p,"wb").write(b)' "$1" "$2"
}

# The sources the Python package builds from, as a fresh checkout has
# them (no build/, no objects; cmd/ whole: the package carries the dlk
# binary), copied into DEST (t500, t471).
py_sources() { # DEST
    mkdir -p "$1" &&
        (cd "$DLK_TESTS/.." && tar cf - --exclude=build --exclude="*.o" \
            --exclude="*.d" --exclude="*.so*" --exclude="*.egg-info" \
            --exclude=__pycache__ Makefile dlk.pc.in include lib python \
            cmd env) | tar xf - -C "$1"
}

# What building the Python package needs: numpy, pip, setuptools and
# wheel; without one, a skip of NAME naming it, and 1 (the caller exits).
# Python modules a test needs: each one missing is a skip naming it.
py_modules() { # NAME MODULE...
    local name=$1 m
    shift
    for m in "$@"; do
        if ! python3 -c "import $m" 2>/dev/null; then
            skip "$name" "$m missing: python3 -m pip install $m"
            return 1
        fi
    done
}

py_need() { # NAME
    if ! have_numpy; then
        skip "$1" "numpy missing: python3 -m pip install numpy"
        return 1
    fi
    if ! python3 -c 'import setuptools, wheel, pip' 2>/dev/null; then
        skip "$1" "pip, setuptools or wheel missing: python3 -m pip install setuptools wheel"
        return 1
    fi
}

# The binding over this build's libdlk.so (DLK_LIBDIR), pip-installed
# from a copy of the sources into $T/py, and in run_py the Python to run
# it with (under SAN=1, with the ASan runtime); 1, after py_need's skip,
# when it cannot be built.  t471, t520.
py_binding() { # NAME
    py_need "$1" || return 1
    ok "copy the sources" py_sources "$T/clone"
    ok "pip install the binding over $DLK_BUILD/libdlk.so" env DLK_LIBDIR="$DLK_BUILD" \
        python3 -m pip install --no-build-isolation --no-deps --no-cache-dir \
        --target "$T/py" "$T/clone/python"
    run_py=(python3)
    if [ -n "${SAN:-}" ] && [ "$SAN" != thread ]; then
        run_py=(env LD_PRELOAD="$(cc -print-file-name=libasan.so)" PYTHONMALLOC=malloc
                ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 python3)
    fi
}

# python3 -m dlk.parquet through the binding py_binding installed.
pq() { PYTHONPATH="$T/py" "${run_py[@]}" -m dlk.parquet "$@"; }

# python3 -m dlk.parquet ARGS in the background with Python's SIGINT
# handler (a background job ignores SIGINT unless it asks for it), sent
# Ctrl-C once DATASET's first image chunk is written; its exit status
# reported as NAME, expected 130.  Its output is in $OUT and $ERR.
pq_interrupted() { # NAME DATASET ARGS...
    local name=$1 ds=$2 pid
    shift 2
    PYTHONPATH="$T/py" "${run_py[@]}" -c 'import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from dlk.parquet import main
sys.exit(main(sys.argv[1:]))' "$@" >"$OUT" 2>"$ERR" &
    pid=$!
    for _ in $(seq 1000); do
        [ -n "$(ls "$ds/chunks/images" 2>/dev/null)" ] && break
        sleep 0.02
    done
    kill -INT "$pid"
    wait "$pid"
    _report "$name" $? 130
}

# A value of a JSON document: PATH is keys and list indices joined by
# dots ("cache.fetched", "epochs.1.requests"); FILE defaults to $OUT.
# Printed as Python prints it (True, None, 3).
json_field() { # PATH [FILE]
    python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "${2:-$OUT}" "$1"
}

# ffmpeg, quiet, overwriting (fixtures for the ingest tests).
ff() { ffmpeg -nostdin -hide_banner -loglevel error -y "$@"; }

# Every sample of every tensor of a dataset: "tensor index sha1" lines, to
# compare two datasets sample by sample (the hash of its dtype, shape and
# values; one `dlk cat DS TENSOR 0: --json` a tensor).
dump() { # DATASET [TENSOR TO LEAVE OUT ...]
    python3 - "$DLK" "$@" <<'PY'
import hashlib, json, subprocess, sys
dlk, ds, skip = sys.argv[1], sys.argv[2], sys.argv[3:]
m = json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))
for t in m["tensors"]:
    if t["name"] in skip:
        continue
    out = subprocess.check_output([dlk, "cat", ds, t["name"], "0:", "--json"])
    lines = out.splitlines()
    assert len(lines) == t["samples"], (t["name"], len(lines), t["samples"])
    for i, line in enumerate(lines):
        o = json.loads(line)
        assert o["index"] == i, (t["name"], i, o["index"])
        b = json.dumps([o["dtype"], o["shape"], o["values"]]).encode()
        print(t["name"], i, hashlib.sha1(b).hexdigest())
PY
}

# small_jpegs DIR PATH...: a 16x12 JPEG at DIR/PATH for each PATH (folders
# made), each of its own colour; needs Pillow
small_jpegs() {
    python3 - "$@" <<'PY'
import os, sys
from PIL import Image
d = sys.argv[1]
for i, n in enumerate(sys.argv[2:]):
    p = os.path.join(d, n)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    Image.new("RGB", (16, 12), (i * 30 % 256, 90, 160)).save(p, quality=90)
PY
}

# ds_rows DATASET TENSOR...: the rows of DATASET as JSON, {key (its path
# below a "/src/" folder): [each TENSOR's value]} (text decoded, a class
# label's name, a scalar's value)
ds_rows() { # DATASET TENSOR...
    python3 - "$DLK" "$@" <<'PY'
import json, subprocess, sys
dlk, ds, tensors = sys.argv[1], sys.argv[2], sys.argv[3:]
m = json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))
kinds = {t["name"]: t["kind"] for t in m["tensors"]}
def col(t):
    out = subprocess.check_output([dlk, "cat", ds, t, "0:", "--json"])
    vals = []
    for line in out.splitlines():
        o = json.loads(line)
        v = o["values"]
        if kinds[t] == "text":
            v = bytes(v).decode()
        elif "class_name" in o:
            v = o["class_name"]
        elif o["shape"] == []:
            v = v[0]
        vals.append(v)
    return vals
keys = [k.split("/src/")[-1] for k in col("key")]
cols = [col(t) for t in tensors]
print(json.dumps({k: [c[i] for c in cols] for i, k in enumerate(keys)},
                 sort_keys=True))
PY
}
