#!/usr/bin/env bash
# t400-fault-matrix.sh - the fault matrix: ingest (from-s3), commit and
# bench-stream (--device cpu) on an s3:// dataset, each through
# tests/faultproxy.py under each fault:
#
#   503-burst  every request answered 503 SlowDown for 1.5 s, then none
#   500        25% of requests answered 500 InternalError
#   reset      25% of answers reset part-way through the body (an answer
#              without a body: after the server did the work)
#   truncate   25% of bodies cut short of their Content-Length
#   stall      one answer stops part-way through its body (an answer
#              without a body: never comes) and the connection hangs
#   refused    the proxy is stopped mid-run, and restarted on the same
#              port 2 s later: connections are refused meanwhile
#   creds      the access key is deleted mid-run (moto checking SigV4);
#              from-dir instead of from-s3, and datasets at a bucket's
#              root: moto mis-checks signatures of listings whose prefix
#              has a '/'
#
# Each cell passes when the operation either completes with results
# identical to a fault-free reference (chunk lists of the head or of the
# commit, which name chunks by their content hash; verify --deep; every
# sample's `dlk cat --raw` after an ingest; bench-stream's checksum), or
# fails with exit 3 and a message that names the object and the fault
# (not a false "already exists" or "another writer"), with main and the
# log unchanged, main verifying --deep, and the same command, run again
# without the fault, completing as above.
#
# Per cell it prints "# cell FAULT OP OUTCOME faults=N requests=N s=N":
# faults injected by the proxy in that cell (each one costs dlk a retry)
# and dlk's requests (DLK_IO_STATS, retries not counted).  With
# DLK_FAULT_TABLE=FILE the table is also written there (markdown).  The
# stall row runs in the background (a stalled request waits for dlk's
# 30 s low-speed timeout) alongside the others.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

FP=$DLK_TESTS/faultproxy.py
OPS="ingest commit bench"
RESIZE="--resize 64x48"
BENCH_OPTS="--device cpu --shuffle --seed 7 --epochs 2 --batch-size 8 --workers 4"

# ---- helpers -----------------------------------------------------------

# fp_start PORT LOG ARGS...: a fault proxy on PORT (0: any) in front of
# $UPSTREAM; sets FP_PID and FP_PORT.
fp_start() {
    local port=$1 log=$2; shift 2
    local pf=$log.port i
    : >"$pf"
    python3 "$FP" --port "$port" --upstream "$UPSTREAM" "$@" >"$pf" 2>>"$log" &
    FP_PID=$!
    at_exit "stop_pid $FP_PID"
    for ((i = 0; i < 100; i++)); do
        [ -s "$pf" ] && break
        kill -0 $FP_PID 2>/dev/null || break
        sleep 0.05
    done
    FP_PORT=$(head -n 1 "$pf")
    if [ -z "$FP_PORT" ]; then
        echo "not ok - faultproxy did not start on port $port"
        sed 's/^/#   /' "$log" | tail -n 10
        return 1
    fi
}
fp_stop() { stop_pid "$FP_PID"; }

py_state() { # URL head|main|main~1: the tensors' samples and chunk lists
    python3 - "$@" <<'EOF'
import json, os, sys, boto3
url, which = sys.argv[1], sys.argv[2]
bucket, _, prefix = url[5:].partition("/")
pre = prefix.rstrip("/") + "/" if prefix else ""
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  region_name="us-east-1")
get = lambda k: s3.get_object(Bucket=bucket, Key=pre + k)["Body"].read()
if which == "head":
    m = json.loads(get("staging/manifest.json"))
else:
    cid = get("refs/heads/main").decode().strip()
    m = json.loads(get("commits/%s.json" % cid))
    if which == "main~1":
        m = json.loads(get("commits/%s.json" % m["parent"]))
print(json.dumps([[t["name"], t["samples"], [c[0] for c in t["chunks"]]]
                  for t in m["tensors"]]))
EOF
}

py_dump() { # URL [--at REF]: name, index and sha1 of every sample
    python3 - "$DLK" "$@" <<'EOF'
import hashlib, json, subprocess, sys
dlk, url, at = sys.argv[1], sys.argv[2], sys.argv[3:]
m = json.loads(subprocess.check_output([dlk, "ls", url, "--json"] + at))
for t in m["tensors"]:
    for i in range(t["samples"]):
        b = subprocess.check_output([dlk, "cat", url, t["name"], str(i),
                                     "--raw"] + at)
        print(t["name"], i, hashlib.sha1(b).hexdigest())
EOF
}

log_sig() { # URL: the commits (id, message), newest first
    "$DLK" log "$1" --json | python3 -c '
import json,sys; print(json.dumps([[c["id"], c["message"]] for c in json.load(sys.stdin)]))'
}

bench_sum() { # the device checksum of a bench-stream text report, if equal
    sed -n 's/^  checksum: device \([0-9a-f]*\), cpu \1: equal$/\1/p' "$1"
}

io_requests() { # the requests of a DLK_IO_STATS line in FILE
    sed -n 's/^dlk: io gets=\([0-9]*\) heads=\([0-9]*\) puts=\([0-9]*\) lists=\([0-9]*\) deletes=\([0-9]*\) .*/\1 \2 \3 \4 \5/p' "$1" |
        tail -n 1 | awk '{print $1+$2+$3+$4+$5}'
}

# op_run OP URL: run one operation, as the matrix runs it
op_run() {
    case $1 in
    ingest)
        if [ "$SOURCE" = dir ]; then
            "$DLK" ingest "$2" from-dir "$SRC/p2" $RESIZE --jobs 2 --fetch 4 --json
        else
            "$DLK" ingest "$2" from-s3 "s3://$RAW/p2" $RESIZE --jobs 2 --fetch 4 --json
        fi ;;
    commit) "$DLK" commit "$2" -m second --json ;;
    bench) "$DLK" bench-stream "$2" $BENCH_OPTS ;;
    esac
}

# op_good OP URL OUTFILE: the operation's result equals the reference's
# (prints why not)
op_good() {
    local op=$1 url=$2 out=$3
    case $op in
    ingest)
        [ "$(py_state "$url" head)" = "$REF_HEAD" ] ||
            { echo "head chunks differ from the reference"; return 1; }
        "$DLK" verify "$url" --deep >/dev/null 2>&1 ||
            { echo "verify --deep of the head fails"; return 1; }
        py_dump "$url" >"$T/dump.cur" 2>&1 && cmp -s "$T/dump.cur" "$REF_DUMP" ||
            { echo "samples (cat --raw) differ from the reference"; return 1; } ;;
    commit)
        grep -q '"committed": true' "$out" ||
            { echo "commit said it committed nothing: $(head -c 200 "$out")"; return 1; }
        [ "$(py_state "$url" main)" = "$REF_HEAD" ] ||
            { echo "main's chunks differ from the reference"; return 1; }
        [ "$(log_sig "$url" | python3 -c 'import json,sys; print([m for _, m in json.load(sys.stdin)])')" = "['second', 'base']" ] ||
            { echo "log is not [second, base]"; return 1; }
        "$DLK" verify "$url" --at main --deep >/dev/null 2>&1 ||
            { echo "verify --at main --deep fails"; return 1; } ;;
    bench)
        local sum; sum=$(bench_sum "$out")
        [ -n "$sum" ] || { echo "no equal checksums in the report"; return 1; }
        [ "$sum" = "$REF_SUM" ] ||
            { echo "checksum $sum, reference $REF_SUM"; return 1; }
        grep -q "^  $REF_SAMPLES" "$out" ||
            { echo "not '$REF_SAMPLES'"; return 1; } ;;
    esac
}

# cell FAULT OP URL: run OP on URL under FAULT, judge it, print the result
cell() {
    local fault=$1 op=$2 url=$3
    local d=$T/cell-$fault-$op
    mkdir -p "$d"
    local plog=$d/proxy.log
    : >"$plog"
    local log_before main_before
    log_before=$(log_sig "$url")
    main_before=$(py_state "$url" main)
    local start=$SECONDS pid rc exercised=yes
    case $fault in
    503-burst)
        fp_start 0 "$plog" --rate-503 1.0 --seed 11 || return 1
        AWS_ENDPOINT_URL=http://127.0.0.1:$FP_PORT DLK_IO_STATS=1 \
            op_run "$op" "$url" >"$d/out" 2>"$d/err" &
        pid=$!
        sleep 1.5
        kill -0 $pid 2>/dev/null || exercised=no
        fp_stop
        fp_start "$FP_PORT" "$plog" --seed 12 || return 1
        wait $pid; rc=$? ;;
    refused)
        fp_start 0 "$plog" --delay-ms 60 --seed 13 || return 1
        AWS_ENDPOINT_URL=http://127.0.0.1:$FP_PORT DLK_IO_STATS=1 \
            op_run "$op" "$url" >"$d/out" 2>"$d/err" &
        pid=$!
        sleep 0.3
        kill -0 $pid 2>/dev/null || exercised=no
        kill -9 "$FP_PID" 2>/dev/null   # connections in flight die too
        wait "$FP_PID" 2>/dev/null
        sleep 2
        fp_start "$FP_PORT" "$plog" --seed 14 || return 1
        wait $pid; rc=$? ;;
    creds)
        local key sec
        read -r key sec < <(iam_key create)
        fp_start 0 "$plog" --delay-ms 60 --seed 15 || return 1
        AWS_ENDPOINT_URL=http://127.0.0.1:$FP_PORT DLK_IO_STATS=1 \
            AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$sec \
            op_run "$op" "$url" >"$d/out" 2>"$d/err" &
        pid=$!
        sleep 0.3
        kill -0 $pid 2>/dev/null || exercised=no
        iam_key delete "$key" >/dev/null
        wait $pid; rc=$? ;;
    *)
        # commit makes about 10 requests (5 with a body), the others 30-50
        local args rate=0.25
        [ "$op" = commit ] && rate=0.5
        case $fault in
        500) args="--rate-500 $rate" ;;
        reset) args="--rate-reset $rate" ;;
        truncate) args="--rate-truncate $rate" ;;
        stall) args="--stall-rate 0.3 --stall-max 1 --stall-ms 90000" ;;
        esac
        # shellcheck disable=SC2086
        fp_start 0 "$plog" $args --seed "$SEED" || return 1
        AWS_ENDPOINT_URL=http://127.0.0.1:$FP_PORT DLK_IO_STATS=1 \
            op_run "$op" "$url" >"$d/out" 2>"$d/err"
        rc=$? ;;
    esac
    fp_stop
    local secs=$((SECONDS - start))
    local nf nreq
    nf=$(grep -c '^fault ' "$plog")
    # which requests: "GET 10, PUT 2"
    local kinds
    kinds=$(awk '/^fault /{print $3}' "$plog" | sort | uniq -c |
            awk '{ if (NR > 1) printf ", "; printf "%s %s", $2, $1 }')
    [ -n "$kinds" ] && nf="$nf ($kinds)"
    [ $fault = refused ] && nf="- (refused for 2 s)"
    nreq=$(io_requests "$d/err"); nreq=${nreq:-?}
    local outcome why=""
    if [ $rc -eq 0 ]; then
        if why=$(op_good "$op" "$url" "$d/out"); then
            outcome="completed, identical"
        else
            outcome="BAD: completed, $why"
        fi
    elif [ $rc -eq 3 ]; then
        local msg; msg=$(grep -v '^dlk: io ' "$d/err" | head -n 1)
        if ! grep -q "'s3://" "$d/err"; then
            outcome="BAD: exit 3 without naming the object: $msg"
        elif grep -qE "already exists|another writer" "$d/err"; then
            outcome="BAD: exit 3, a retry taken for a conflict: $msg"
        elif [ "$(log_sig "$url")" != "$log_before" ]; then
            outcome="BAD: exit 3 and the log changed"
        elif [ "$(py_state "$url" main)" != "$main_before" ]; then
            outcome="BAD: exit 3 and main changed"
        elif ! "$DLK" verify "$url" --at main --deep >/dev/null 2>&1; then
            outcome="BAD: exit 3 and main does not verify --deep"
        elif ! op_run "$op" "$url" >"$d/out2" 2>"$d/err2"; then
            outcome="BAD: exit 3, and the rerun failed: $(head -n 1 "$d/err2")"
        elif ! why=$(op_good "$op" "$url" "$d/out2"); then
            outcome="BAD: exit 3, rerun: $why"
        else
            local tries
            tries=$(grep -o 'after [0-9]* attempts' "$d/err" | head -n 1)
            outcome="failed cleanly (exit 3${tries:+, $tries}), rerun identical"
        fi
    else
        outcome="BAD: exit $rc: $(grep -v '^dlk: io ' "$d/err" | head -n 1)"
    fi
    [ $exercised = yes ] || outcome="BAD: the operation ended before the fault began ($outcome)"
    case $fault in
    refused|creds) ;;
    *) [ "${nf%% *}" -gt 0 ] || outcome="BAD: no fault was injected ($outcome)" ;;
    esac
    case $outcome in
    failed*) echo "# $fault x $op: $(grep -v '^dlk: io ' "$d/err" | head -n 1)" ;;
    esac
    echo "# cell $fault $op | $outcome | faults=$nf requests=$nreq s=$secs"
    echo "$fault|$op|$outcome|$nf|$nreq|$secs" >>"$TABLE"
    case $outcome in
    BAD*) echo "not ok - $fault x $op: $outcome"
          sed 's/^/#   stderr: /' "$d/err" | head -n 8
          return 1 ;;
    *) echo "ok - $fault x $op: $outcome" ;;
    esac
}

# row FAULT: a dataset holding p1 in commit 'base', then the three cells
# (without key tensors: samples are compared with the reference's, and a
# key's version differs between a directory and a bucket)
row() {
    local fault=$1 url=$2
    SEED=$(( $(printf '%s' "$fault" | cksum | cut -d' ' -f1) % 1000 ))
    if [ "$SOURCE" = dir ]; then
        "$DLK" create "$url" from-dir "$SRC/p1" $RESIZE --chunk-size 32K --no-key --quiet
    else
        "$DLK" create "$url" from-s3 "s3://$RAW/p1" $RESIZE --chunk-size 32K --no-key --quiet
    fi || { echo "not ok - $fault: setup create"; return 1; }
    "$DLK" commit "$url" -m base >/dev/null ||
        { echo "not ok - $fault: setup commit"; return 1; }
    [ "$(py_state "$url" main)" = "$REF_BASE" ] ||
        { echo "not ok - $fault: setup differs from the reference"; return 1; }
    local op
    for op in $OPS; do
        cell "$fault" "$op" "$url"
        # whatever happened, the next operation starts from the same state
        if [ "$op" = ingest ] && [ "$(py_state "$url" head)" != "$REF_HEAD" ]; then
            echo "not ok - $fault: head after ingest is not the reference's"
            return 1
        fi
    done
}

iam_key() { # create | delete KEY, with the admin key
    AWS_ACCESS_KEY_ID=$ADMIN_KEY AWS_SECRET_ACCESS_KEY=$ADMIN_SECRET \
    python3 - "$@" <<'EOF'
import os, sys, boto3
iam = boto3.client("iam", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                   region_name="us-east-1")
if sys.argv[1] == "create":
    k = iam.create_access_key(UserName="dlk")["AccessKey"]
    print(k["AccessKeyId"], k["SecretAccessKey"])
else:
    iam.delete_access_key(UserName="dlk", AccessKeyId=sys.argv[2])
EOF
}

# ---- the background row (the same script, run again) --------------------
if [ -n "${T400_ROW:-}" ]; then
    row "$T400_ROW" "$T400_URL"
    exit 0
fi

# ---- setup ---------------------------------------------------------------
command -v ffmpeg >/dev/null ||
    { skip "fault matrix" "ffmpeg missing: apt-get install -y ffmpeg"; exit 0; }
python3 -c 'import boto3' 2>/dev/null ||
    { skip "fault matrix" "boto3 missing: python3 -m pip install boto3"; exit 0; }
if ! grep -q -- '--stall-rate' "$FP"; then
    echo "not ok - tests/faultproxy.py has no --stall-rate"
    exit 1
fi
t_start=$SECONDS
# a private copy: a rebuild of build/dlk during the run must not change it
cp "$DLK" "$T/dlk" && DLK=$T/dlk && export DLK
TABLE=$T/table
: >"$TABLE"

SRC=$T/src
for p in p1 p2; do
    for c in a b; do
        mkdir -p "$SRC/$p/$c"
        ss=0; [ $p = p2 ] && ss=3
        [ $c = b ] && ss=$((ss + 6))
        ffmpeg -nostdin -hide_banner -loglevel error -ss $ss -f lavfi \
            -i "testsrc2=s=320x240:r=10" -frames:v 10 -q:v 3 "$SRC/$p/$c/$p$c%02d.jpg"
    done
done

s3_start
UPSTREAM=$AWS_ENDPOINT_URL
RAW=dlk-t400-raw
s3_mkbucket $RAW
s3_mkbucket dlk-t400
python3 - "$SRC" "$RAW" <<'EOF'
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        s3.upload_file(p, sys.argv[2], os.path.relpath(p, sys.argv[1]))
EOF

# the reference, without faults
SOURCE=s3
REF=s3://dlk-t400/ref
ok "reference: create from-s3 p1" dlk create $REF from-s3 s3://$RAW/p1 $RESIZE --chunk-size 32K --no-key --quiet
ok "reference: commit base" dlk commit $REF -m base
REF_BASE=$(py_state $REF main)
ok "reference: ingest p2" op_run ingest $REF
check "reference: 20 rows" grep -q '"ingested": 20' "$OUT"
ok "reference: commit second" op_run commit $REF
REF_HEAD=$(py_state $REF head)
check "reference: several chunks" python3 -c '
import json,sys; t=json.loads(sys.argv[1]); assert t[0][1]==40 and len(t[0][2])>=8, t' "$REF_HEAD"
REF_DUMP=$T/ref.dump
py_dump $REF >"$REF_DUMP"
check "reference: 80 samples dumped" test "$(wc -l <"$REF_DUMP")" -eq 80
ok "reference: bench-stream" op_run bench $REF
REF_SUM=$(bench_sum "$OUT")
REF_SAMPLES=$(grep -o '^  [0-9]* samples in [0-9]* batches' "$OUT" | sed 's/^  //')
check "reference: checksum $REF_SUM" test -n "$REF_SUM" -a -n "$REF_SAMPLES"
export REF_BASE REF_HEAD REF_DUMP REF_SUM REF_SAMPLES RAW SRC UPSTREAM TABLE SOURCE

# the stall row in the background: its timeouts overlap the other rows
T400_ROW=stall T400_URL=s3://dlk-t400/stall bash "$0" >"$T/stall.tap" 2>&1 &
stall_pid=$!

for fault in 503-burst 500 reset truncate refused; do
    row "$fault" "s3://dlk-t400/$fault"
done

# credentials: a second server that checks signatures
s3_start --auth
UPSTREAM=$AWS_ENDPOINT_URL
ADMIN_KEY=$AWS_ACCESS_KEY_ID ADMIN_SECRET=$AWS_SECRET_ACCESS_KEY
s3_mkbucket dlk-t400-creds
SOURCE=dir
row creds s3://dlk-t400-creds

wait $stall_pid
cat "$T/stall.tap"

# ---- the table -----------------------------------------------------------
total=$(wc -l <"$TABLE")
bad=$(grep -c '|BAD' "$TABLE")
{
    echo "| fault | operation | outcome | faults injected (retries) | requests | s |"
    echo "|---|---|---|---|---|---|"
    for fault in 503-burst 500 reset truncate stall refused creds; do
        for op in $OPS; do
            grep "^$fault|$op|" "$TABLE" | awk -F'|' '{printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6}'
        done
    done
} >"$T/table.md"
sed 's/^/# /' "$T/table.md"
echo "# $((total - bad)) of $total cells passed, $((SECONDS - t_start)) s"
[ -n "${DLK_FAULT_TABLE:-}" ] && cp "$T/table.md" "$DLK_FAULT_TABLE"
check "21 cells ran" test "$total" -eq 21
