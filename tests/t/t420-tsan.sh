#!/usr/bin/env bash
# t420-tsan.sh - the threaded parts under ThreadSanitizer: the loader unit
# test; bench-stream (cpu, several I/O workers, shuffled, several epochs)
# on a local dataset, on an uncompressed one with DLK_NO_MMAP and on an
# s3:// one; ingest from-dir of JPEGs with --jobs 2 --fetch 4 (ordered and
# --unordered) and from-s3 through moto; bench-stream of the s3:// one
# through a chunk cache. Any ThreadSanitizer report fails
# the test (halt_on_error=1).
#
# Uses $DLK when it is a TSan build (make SAN=thread test), else builds
# build-tsan/ (make SAN=thread all unit; CUDA is left out there).
. "$DLK_TESTS/lib.sh"
root=$(cd "$DLK_TESTS/.." && pwd)

# Does TSan work here at all (compiler runtime, kernel memory layout)?
probe=$T/tsan-probe
cat >"$probe.c" <<'EOF'
#include <pthread.h>
static int x;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *f(void *a) { pthread_mutex_lock(&mu); x++; pthread_mutex_unlock(&mu); return a; }
int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); f(0); pthread_join(t, 0); return x != 2; }
EOF
cc=${CC:-cc}
if ! "$cc" -fsanitize=thread -g "$probe.c" -o "$probe" -lpthread >"$probe.log" 2>&1; then
    skip "ThreadSanitizer" "$cc cannot link -fsanitize=thread ($(head -c 200 "$probe.log" | tr '\n' ' ')): apt-get install -y libtsan2 (gcc) or clang"
    exit 0
fi
if ! "$probe" >"$probe.log" 2>&1; then
    skip "ThreadSanitizer" "the TSan runtime does not start on this kernel ($(head -c 200 "$probe.log" | tr '\n' ' ')); try: sysctl vm.mmap_rnd_bits=28"
    exit 0
fi

if nm "$DLK" 2>/dev/null | grep -q __tsan_init; then
    TDLK=$DLK
    TBUILD=$DLK_BUILD
else
    TBUILD=$root/build-tsan
    if ! make -C "$root" SAN=thread all unit >"$T/make.log" 2>&1; then
        echo "not ok - make SAN=thread all unit"
        sed 's/^/#   /' "$T/make.log" | tail -n 30
        exit 1
    fi
    echo "ok - make SAN=thread all unit"
    TDLK=$TBUILD/dlk
fi

# private copies: a rebuild during the run must not change them
cp "$TDLK" "$T/dlk-tsan" && TDLK=$T/dlk-tsan
check "$TDLK is built with ThreadSanitizer" sh -c "nm '$TDLK' | grep -q __tsan_init"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:exitcode=66"
# tsan NAME WANT ARGS...: the command must exit WANT and TSan must say nothing
tsan() {
    local name=$1 want=$2; shift 2
    "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    if grep -q 'ThreadSanitizer' "$ERR" || [ $rc -eq 66 ]; then
        echo "not ok - $name: ThreadSanitizer report (exit $rc)"
        grep -v '^dlk: io ' "$ERR" | sed 's/^/#   /' | head -n 80
        return 1
    fi
    _report "$name (no TSan report)" $rc "$want"
}

if [ -x "$TBUILD/tests/test_loader" ]; then
    tsan "unit test_loader" 0 "$TBUILD/tests/test_loader"
else
    echo "not ok - $TBUILD/tests/test_loader is not built"
fi

have_numpy || { skip "TSan CLI flows" "numpy missing: python3 -m pip install numpy"; exit 0; }
command -v ffmpeg >/dev/null || { skip "TSan CLI flows" "ffmpeg missing: apt-get install -y ffmpeg"; exit 0; }

JPG=$T/jpg
for c in a b c; do
    mkdir -p "$JPG/$c"
    ffmpeg -nostdin -hide_banner -loglevel error -f lavfi \
        -i "testsrc2=s=320x240" -frames:v 20 -q:v 3 "$JPG/$c/f%03d.jpg"
    for f in "$JPG/$c"/*.jpg; do echo "caption of $f" > "${f%.jpg}.txt"; done
done
printf 'broken' > "$JPG/a/f999.jpg"
echo "caption of a broken image" > "$JPG/a/f999.txt"

D=$T/jpgds
tsan "ingest from-dir --jobs 2 --fetch 4" 0 "$TDLK" create "$D" from-dir "$JPG" \
    --resize 64x48 --jobs 2 --fetch 4 --chunk-size 32K --json
check "60 rows (and the broken one reported)" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==60 and len(d["errors"])==1, d' "$OUT"
U=$T/unordered
tsan "ingest --unordered --jobs 2 --fetch 4" 0 "$TDLK" create "$U" from-dir "$JPG" \
    --resize 64x48 --jobs 2 --fetch 4 --chunk-size 32K --unordered --quiet
tsan "ingest --jobs 4 --fetch 1 (queue full)" 0 "$TDLK" create "$T/j4" from-dir "$JPG" \
    --resize 32x24 --jobs 4 --fetch 1 --chunk-size 8K --quiet
# a decode thread on every core (and more): they read their rows themselves
ncpu=$(nproc)
tsan "ingest --jobs $((ncpu + 2)), no fetch threads" 0 "$TDLK" create "$T/inl" from-dir "$JPG" \
    --resize 32x24 --jobs $((ncpu + 2)) --chunk-size 8K --json
check "60 rows read by the decode threads" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==60 and len(d["errors"])==1 and d["stages"]["fetch"] > 0, d' "$OUT"
tsan "ingest --unordered, no fetch threads" 0 "$TDLK" create "$T/inlu" from-dir "$JPG" \
    --resize 32x24 --jobs $((ncpu + 2)) --chunk-size 8K --unordered --quiet
tsan "commit" 0 "$TDLK" commit "$D" -m tsan

tsan "bench-stream cpu, 4 workers, 3 epochs, shuffle" 0 "$TDLK" bench-stream "$D" \
    --device cpu --workers 4 --epochs 3 --shuffle --batch-size 8 --window 3 --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"
tsan "bench-stream, small memory budget, prefetch 1" 0 "$TDLK" bench-stream "$D" \
    --device cpu --workers 3 --epochs 2 --shuffle --batch-size 7 --prefetch 1 \
    --memory 256K --step-ms 1 --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"
tsan "bench-stream rank 1 of 3, no mmap" 0 env DLK_NO_MMAP=1 "$TDLK" bench-stream "$D" \
    --device cpu --workers 4 --epochs 2 --shuffle --rank 1 --world 3 --batch-size 5 --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"

# zstd chunks: the decompress stage
Z=$T/zstd
python3 "$DLK_TESTS/../examples/sample_data.py" "$T/npy" --samples 60 --size 16 >/dev/null
tsan "create (zstd)" 0 "$TDLK" create "$Z" --tensor images:u8:16x16x3:zstd \
    --tensor labels:i32 --tensor 'boxes:f32:?x4:zstd' --chunk-size 2K
tsan "ingest .npy (zstd)" 0 "$TDLK" ingest "$Z" from-dir "$T/npy" --jobs 2 --quiet
tsan "bench-stream of zstd chunks" 0 "$TDLK" bench-stream "$Z" --device cpu \
    --workers 4 --epochs 3 --shuffle --batch-size 6 --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"

# S3: the request engine thread and its callers
. "$DLK_TESTS/s3lib.sh"
s3_start
s3_mkbucket dlk-t420
python3 - "$JPG" <<'EOF'
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        s3.upload_file(p, "dlk-t420", "src/" + os.path.relpath(p, sys.argv[1]))
EOF
S=s3://dlk-t420/ds
tsan "ingest from-s3 --jobs 2 --fetch 4" 0 "$TDLK" create "$S" from-s3 s3://dlk-t420/src \
    --resize 64x48 --jobs 2 --fetch 4 --chunk-size 32K --json
check "60 rows from S3" grep -q '"ingested": 60' "$OUT"
tsan "commit (s3)" 0 "$TDLK" commit "$S" -m tsan
tsan "bench-stream s3, 4 workers, 2 epochs, shuffle" 0 "$TDLK" bench-stream "$S" \
    --device cpu --workers 4 --epochs 2 --shuffle --batch-size 8 --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"
# the chunk cache: spans of one chunk fetched by one thread while the
# others wait on its lock, then read from the copies
tsan "bench-stream s3 through an empty chunk cache" 0 "$TDLK" bench-stream \
    "$S" --device cpu --workers 4 --epochs 2 --shuffle --batch-size 8 \
    --cache-dir "$T/cache" --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"
tsan "bench-stream s3 through the full chunk cache, a small limit" 0 \
    "$TDLK" bench-stream "$S" --device cpu --workers 4 --epochs 2 --shuffle \
    --batch-size 8 --cache-dir "$T/cache" --cache-limit 100K --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"
# retries and the in-flight limit (AIMD) under faults (no resets: a reset
# after the server stored a create-only PUT is t400's business)
s3_proxy_start --rate-503 0.2 --rate-500 0.05 --rate-truncate 0.05 --seed 420
tsan "bench-stream s3 through 503s, 500s, truncated bodies" 0 env \
    AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PROXY_PORT DLK_S3_MAX_ATTEMPTS=20 \
    "$TDLK" bench-stream "$S" --device cpu --workers 4 --epochs 2 --shuffle \
    --batch-size 8 --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"
# ... with the source's GETs on three I/O threads (DLK_S3_IO_THREADS)
tsan "ingest from-s3 through 503s, 500s, truncated bodies, 3 I/O threads" 0 env \
    AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PROXY_PORT DLK_S3_MAX_ATTEMPTS=20 \
    DLK_S3_IO_THREADS=3 \
    "$TDLK" create s3://dlk-t420/ds2 from-s3 s3://dlk-t420/src --resize 32x24 \
    --jobs 2 --fetch 4 --chunk-size 8K --json
check "60 rows through the proxy" grep -q '"ingested": 60' "$OUT"
tsan "verify --all --deep (s3)" 0 "$TDLK" verify s3://dlk-t420/ds2 --all --deep

# the wide listing's threads, each range's next page asked for before its
# page is parsed (s3_dir_server sends the token first; moto after the
# keys): three folders of 1,001 keys, two pages each
if [ -x "$DLK_BUILD/tests/s3_dir_server" ]; then
    python3 -c '
import os, sys
for f in "abc":
    os.makedirs("%s/%s" % (sys.argv[1], f))
    for i in range(1001):
        open("%s/%s/%05d.cls" % (sys.argv[1], f, i), "w").write(str(i % 3))' "$T/dsrv/raw/wide"
    "$DLK_BUILD/tests/s3_dir_server" "$T/dsrv" > "$T/dsrv.out" 2>/dev/null &
    dsrv=$!
    at_exit kill "$dsrv"
    for _ in $(seq 100); do grep -q '^port' "$T/dsrv.out" && break; sleep 0.1; done
    tsan "ingest from-s3 (s3_dir_server), three folders of two pages" 0 env \
        AWS_ENDPOINT_URL=http://127.0.0.1:$(awk '/^port/{print $2}' "$T/dsrv.out") \
        "$TDLK" create "$T/wide" from-s3 s3://raw/wide --jobs 2 --json
    check "3003 rows" grep -q '"ingested": 3003' "$OUT"
else
    echo "not ok - $DLK_BUILD/tests/s3_dir_server is not built (make unit)"
fi
