#!/usr/bin/env bash
# from-s3 against s3_dir_server (tests/bench/s3_dir_server.c, the fast
# read-only S3 endpoint the ingest benchmark uses): the result equals
# from-dir over the same folder sample by sample, also for keys with
# spaces, '+' and UTF-8 and for listings past one page; the server
# answers ranges, unknown keys and writes as S3 does.
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "from-s3 via s3_dir_server" "ffmpeg missing"; exit 0; }
srv_bin=$DLK_BUILD/tests/s3_dir_server
if [ ! -x "$srv_bin" ]; then
    echo "not ok - $srv_bin is not built (make unit; needs libmicrohttpd-dev)"
    exit 1
fi

R=$T/root
S=$R/raw/train
for c in cat dog; do
    mkdir -p "$S/$c"
    ff -f lavfi -i "testsrc2=s=320x240:r=10" -frames:v 5 -q:v 3 "$S/$c/$c%02d.jpg"
done
cp "$S/cat/cat01.jpg" "$S/dog/a b+c é.jpg"
mkdir -p "$R/raw/labels"
python3 -c '
import sys
for i in range(1100):
    open("%s/%05d.cls" % (sys.argv[1], i), "w").write(str(i % 7))' "$R/raw/labels"
# three folders of 1,100 keys: listed as three ranges at once, two pages
# each, the second asked for before the first is parsed (this server,
# like AWS, sends the next page's token before the keys)
python3 -c '
import os, sys
for f in "abc":
    os.makedirs("%s/%s" % (sys.argv[1], f))
    for i in range(1100):
        open("%s/%s/%05d.cls" % (sys.argv[1], f, i), "w").write(str((i + ord(f)) % 5))' "$R/raw/wide"

"$srv_bin" "$R" > "$T/srv.out" 2> "$T/srv.err" &
srv=$!
at_exit kill "$srv"
for _ in $(seq 100); do grep -q '^port' "$T/srv.out" && break; sleep 0.1; done
port=$(awk '/^port/{print $2}' "$T/srv.out")
check "server started" test -n "$port"
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_REGION=us-east-1 \
       AWS_ACCESS_KEY_ID=t216 AWS_SECRET_ACCESS_KEY=t216 \
       AWS_SHARED_CREDENTIALS_FILE=$T/none AWS_CONFIG_FILE=$T/none
unset AWS_SESSION_TOKEN AWS_PROFILE DLK_S3_NO_SIGN DLK_S3_ADDRESSING

ok "create from-s3" dlk create "$T/s3" from-s3 s3://raw/train --resize 64x48 --json
check "11 rows" grep -q '"ingested": 11' "$OUT"
# decode threads: the cores, less one a source I/O thread from 12 cores
jobs_are() { # JSON IO_THREADS(0: default)
    python3 -c '
import json,os,sys; d=json.load(open(sys.argv[1])); io=int(sys.argv[2])
cores=len(os.sched_getaffinity(0))
io=io or max(1, min(4, cores // 8))
want=cores - io if cores >= 12 else cores
assert d["jobs"] == want, (d["jobs"], want, cores)' "$@"
}
check "decode threads: the cores ($(nproc)), less the I/O thread's from 12" jobs_are "$OUT" 0
ok "create from-dir of the same folder" dlk create "$T/dir" from-dir "$S" --resize 64x48 --quiet
# key holds the objects' URLs or paths, key_version ETags from S3 and
# sizes and times from a directory
dump "$T/s3" key key_version > "$T/s3.txt"
dump "$T/dir" key key_version > "$T/dir.txt"
check "from-s3 equals from-dir sample by sample" cmp "$T/s3.txt" "$T/dir.txt"
ok "a folder below the root" dlk create "$T/part" from-s3 s3://raw/train/dog --resize 8x8 --json
check "6 rows under train/dog/" grep -q '"ingested": 6' "$OUT"

ok "1100 label-only rows: two listing pages" dlk create "$T/lab" from-s3 s3://raw/labels --order sorted --json
check "1100 rows" grep -q '"ingested": 1100' "$OUT"
ok "label of row 1099" dlk cat "$T/lab" labels 1099 --json
check "is 1099 % 7 = 0" grep -q '"values":\[0\]' "$OUT"

ok "three folders of 1100 label rows" dlk create "$T/wide" from-s3 s3://raw/wide --order sorted --json
check "3300 rows" grep -q '"ingested": 3300' "$OUT"
ok "the same folders from-dir" dlk create "$T/wided" from-dir "$R/raw/wide" --order sorted --quiet
(cd "$T/wide" && find chunks -type f | grep -Ev '/key(_version)?/' | sort) > "$T/wide.txt"
(cd "$T/wided" && find chunks -type f | grep -Ev '/key(_version)?/' | sort) > "$T/wided.txt"
check "... the same chunks (the same rows in the same order)" cmp "$T/wide.txt" "$T/wided.txt"
check "... which are some" test -s "$T/wide.txt"
ok "row 1100 is the first of folder b" dlk cat "$T/wide" labels 1100 --json
check "... its label (0 + 98) % 5" grep -q '"values":\[3\]' "$OUT"

# bulk GETs spread over three I/O threads (the default on 24 cores or
# more): the same dataset; the 1100 label rows are many batches
DLK_S3_IO_THREADS=3 ok "three I/O threads for the source's GETs" dlk create "$T/s3io" from-s3 s3://raw/train --resize 64x48 --quiet
dump "$T/s3io" key key_version > "$T/s3io.txt"
check "... equals from-dir sample by sample" cmp "$T/s3io.txt" "$T/dir.txt"
DLK_S3_IO_THREADS=3 ok "three I/O threads, 1100 label rows" dlk create "$T/labio" from-s3 s3://raw/labels --order sorted --json
check "... all 1100 rows" grep -q '"ingested": 1100' "$OUT"
check "... decode threads: the cores, less three from 12" jobs_are "$OUT" 3
# chunks are named by their bytes: the same chunks, the same dataset
(cd "$T/lab" && find chunks -type f | sort) > "$T/lab.txt"
(cd "$T/labio" && find chunks -type f | sort) > "$T/labio.txt"
check "... the same chunks as one I/O thread's" cmp "$T/labio.txt" "$T/lab.txt"
check "... which are some" test -s "$T/lab.txt"
check "DLK_S3_IO_THREADS out of range is refused" sh -c '! DLK_S3_IO_THREADS=17 "$DLK" ls s3://raw/train 2>"$0/e" && grep -q DLK_S3_IO_THREADS "$0/e"' "$T"

base=$AWS_ENDPOINT_URL/raw
check "a range is 206 with its bytes" test "$(curl -s -o "$T/r" -w '%{http_code}' -r 2-9 "$base/train/cat/cat01.jpg")" = 206
check "... the right bytes" cmp "$T/r" <(tail -c +3 "$S/cat/cat01.jpg" | head -c 8)
check "an unknown key is 404 NoSuchKey" sh -c "curl -s -w '%{http_code}' '$base/train/nope.jpg' | grep -q 'NoSuchKey.*404'"
check "'..' does not leave the bucket" sh -c "curl -s --path-as-is -w '%{http_code}' '$base/../raw/train/cat/cat01.jpg' | grep -q 404"
check "a PUT is 501 (read-only)" test "$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data x "$base/k")" = 501
