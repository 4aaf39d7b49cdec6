#!/usr/bin/env bash
# t302-s3-hedge.sh - hedged GETs: one slow object never stalls the reader.
# tests/faultproxy.py holds back the body of the first GET of a few
# objects by 3 s (--slow-first-per-path); the S3 engine must send a
# second, identical GET once the first is overdue (max of 200 ms and 4x
# the median of its size class), take whichever answers first and cancel
# the other.  So 300 GETs finish in far less than 3 s, the hedge counter
# (dlk_io_counters.hedges) is above zero and every byte matches.  Without
# slow answers there are (almost) no hedges; with DLK_S3_HEDGE=0 the
# slow objects cost their 3 s; a whole dataset streamed with bench-stream
# is not held up by one slow chunk either.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

lib=$DLK_BUILD/libdlk.a
if [ ! -f "$lib" ]; then
    echo "not ok - $lib is not built"
    exit 1
fi
root=$(cd "$DLK_TESTS/.." && pwd)

# A reader through libdlk's store API: N threads GET every object below
# a prefix into OUTDIR and report the time, the slowest GET and hedges.
cat >"$T/hedge_get.c" <<'C'
#include "dlk_bench.h"
#include "store/store.h"
#include "store_env.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef struct job {
    Dlk_store *s;
    char **keys;
    size_t n, cap, next;
    const char *dir;
    int failed;
    double worst;
    pthread_mutex_t mu;
} job;
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}
static int add(void *ud, const char *key, uint64_t size)
{
    job *j = ud;
    (void)size;
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 64;
        j->keys = realloc(j->keys, j->cap * sizeof *j->keys);
        if (!j->keys)
            return 1;
    }
    j->keys[j->n++] = strdup(key);
    return 0;
}
static void *worker(void *arg)
{
    job *j = arg;
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_error err = {0};
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t i = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n)
            break;
        b.len = 0;
        double t0 = now();
        dlk_status rc = Dlk_store_get(j->s, j->keys[i], 1u << 30, &b, NULL,
                                      &err);
        double dt = now() - t0;
        pthread_mutex_lock(&j->mu);
        if (dt > j->worst)
            j->worst = dt;
        if (rc)
            j->failed++;
        pthread_mutex_unlock(&j->mu);
        if (rc) {
            fprintf(stderr, "hedge_get: %s\n", err.msg);
            continue;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", j->dir, j->keys[i]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f)) {
            fprintf(stderr, "hedge_get: cannot write %s\n", path);
            pthread_mutex_lock(&j->mu);
            j->failed++;
            pthread_mutex_unlock(&j->mu);
        }
    }
    Dlk_buf_free(&b);
    return NULL;
}
int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int threads = atoi(argv[2]);
    dlk_error err = {0};
    job j = {0};
    j.dir = argv[3];
    pthread_mutex_init(&j.mu, NULL);
    store_env env; /* DLK_S3_HEDGE and the endpoint, as dlk reads them */
    if (store_env_load(&env, false, &err) ||
        Dlk_store_open(argv[1], false, &env.opts, &j.s, &err) ||
        Dlk_store_list(j.s, "", add, &j, &err)) {
        fprintf(stderr, "hedge_get: %s\n", err.msg);
        return 1;
    }
    pthread_t th[64];
    double t0 = now();
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, &j);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double sec = now() - t0;
    dlk_io_counters io;
    dlk_io_counters_get(&io);
    printf("objects=%zu seconds=%.3f worst=%.3f gets=%llu hedges=%llu "
           "failed=%d\n", j.n, sec, j.worst, (unsigned long long)io.gets,
           (unsigned long long)io.hedges, j.failed);
    for (size_t i = 0; i < j.n; i++)
        free(j.keys[i]);
    free(j.keys);
    Dlk_store_free(j.s);
    store_env_free(&env);
    pthread_mutex_destroy(&j.mu);
    return j.failed ? 1 : 0;
}
C
san=
if nm "$lib" 2>/dev/null | grep -q __asan_; then
    san="-fsanitize=address,undefined -fno-sanitize-recover=all"
elif nm "$lib" 2>/dev/null | grep -q __tsan_; then
    san=-fsanitize=thread
fi
# shellcheck disable=SC2046,SC2086
ok "build the reader" cc -O1 -g -std=c11 -D_GNU_SOURCE $san \
    -I"$root/include" -I"$root/lib" -I"$root/env" -o "$T/hedge_get" \
    "$T/hedge_get.c" "$root/env/store_env.c" \
    "$lib" $(pkg-config --libs jansson libxxhash libzstd libcurl expat libcrypto) \
    -lpthread -lm || exit 1

s3_start
s3_mkbucket dlk-t302
mkdir -p "$T/src"
python3 - "$T/src" <<'PY'
import os, sys
for i in range(300):
    with open(os.path.join(sys.argv[1], "obj%04d" % i), "wb") as f:
        f.write(os.urandom(48 * 1024 + i))
PY
ok "upload 300 objects" aws --endpoint-url "$AWS_ENDPOINT_URL" s3 cp \
    --recursive --quiet "$T/src" s3://dlk-t302/set/

# read N: the reader through proxy port $2 into $T/dst$1; stats in $OUT
read_all() { # NAME PORT [ENV=...]
    local name=$1 port=$2; shift 2
    rm -rf "$T/dst$name"
    mkdir -p "$T/dst$name"
    ok "$name: read every object" env "$@" \
        AWS_ENDPOINT_URL="http://127.0.0.1:$port" \
        "$T/hedge_get" s3://dlk-t302/set 16 "$T/dst$name"
    check "$name: every byte matches" diff -r "$T/src" "$T/dst$name"
}
stat_of() { # KEY  (of the reader's last line)
    sed -n "s/.* $1=\([0-9.]*\).*/\1/p" "$OUT" | tail -n 1
}

# 1. three objects answer their first GET 3 s late
s3_proxy_start --slow-path '/obj0(007|150|299)$' --slow-ms 3000 \
    --slow-first-per-path --seed 302
slow_log=$S3_PROXY_LOG slow_port=$S3_PROXY_PORT
read_all slow "$slow_port"
sec=$(stat_of seconds) worst=$(stat_of worst) hedges=$(stat_of hedges)
echo "# slow: $(cat "$OUT")"
slow_sec=$sec
check "slow: no GET waited for its slow answer (worst $worst s)" \
    awk -v s="$worst" 'BEGIN { exit !(s < 1.5) }'
check "slow: hedges were sent ($hedges)" test "$hedges" -ge 1
n=$(grep -c '^fault slow ' "$slow_log")
check "slow: the proxy held back 3 answers ($n)" test "$n" -eq 3

# 2. no slow answers: no spurious duplicates
s3_proxy_start --seed 302
read_all fast "$S3_PROXY_PORT"
hedges=$(stat_of hedges)
echo "# fast: $(cat "$OUT")"
# against the same 300 GETs with no slow answer, read in this run (a
# busy machine makes both slower): a GET that waited for its held answer
# would add its 3 s
fast_sec=$(stat_of seconds)
check "slow: 300 GETs within 1.5 s of the same with no slow answer ($slow_sec s, $fast_sec s)" \
    awk -v s="$slow_sec" -v f="$fast_sec" 'BEGIN { exit !(s < f + 1.5) }'
check "fast: (almost) no hedges ($hedges)" test "$hedges" -le 6

# 3. hedging off: the slow objects cost their 3 s (the proxy remembers
#    the paths it slowed, so a fresh one)
s3_proxy_start --slow-path '/obj0007$' --slow-ms 3000 --slow-first-per-path
read_all off "$S3_PROXY_PORT" DLK_S3_HEDGE=0
sec=$(stat_of seconds) hedges=$(stat_of hedges)
check "off: no hedges ($hedges)" test "$hedges" -eq 0
check "off: the slow object took its 3 s ($sec s)" \
    awk -v s="$sec" 'BEGIN { exit !(s >= 2.9) }'
fails "a bad DLK_S3_HEDGE_MIN_MS is refused" 1 env DLK_S3_HEDGE_MIN_MS=x \
    "$T/hedge_get" s3://dlk-t302/set 1 "$T/dstoff"
check "its message names the variable" grep -q DLK_S3_HEDGE_MIN_MS "$ERR"

# 4. a dataset streamed by bench-stream: one slow chunk does not hold up
#    the epoch
if have_numpy; then
    python3 - "$T/npy" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(302)
for i in range(2048):
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8))
PY
    ds=s3://dlk-t302/ds
    ok "create a dataset of small chunks" "$DLK" create "$ds" \
        --tensor images:u8:32x32x3 --chunk-size 256K
    ok "ingest 2048 samples" "$DLK" ingest "$ds" from-dir "$T/npy" -q
    aws --endpoint-url "$AWS_ENDPOINT_URL" s3 ls --recursive \
        s3://dlk-t302/ds/chunks/ >"$T/chunks"
    nchunks=$(wc -l <"$T/chunks")
    # the first GET of one chunk in the middle answers 3 s late
    key=$(awk 'NR == 5 {print $4}' "$T/chunks")
    s3_proxy_start --slow-path "/${key}\$" --slow-ms 3000 \
        --slow-first-per-path
    s=$(date +%s.%N)
    ok "bench-stream with one slow chunk of $nchunks" \
        env AWS_ENDPOINT_URL="http://127.0.0.1:$S3_PROXY_PORT" \
        "$DLK" bench-stream "$ds" --device cpu --json --workers 8
    e=$(date +%s.%N)
    check "bench-stream: checksums match" grep -q '"checksum_ok": *true' "$OUT"
    n=$(grep -c '^fault slow ' "$S3_PROXY_LOG")
    check "bench-stream: the proxy held back a chunk ($n)" test "$n" -eq 1
    check "bench-stream: done in far less than 3 s" \
        awk -v s="$s" -v e="$e" 'BEGIN { exit !(e - s < 2.5) }'
else
    skip "bench-stream with one slow chunk" "no numpy"
fi
