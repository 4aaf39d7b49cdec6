#!/usr/bin/env bash
# t397-s3-chunk-parts.sh - a chunk of 16 MiB or more is read from S3 as
# ranged GETs of 8 MiB in flight together: the bytes are the chunk's
# (checksums and values), each part is a request, and every way a part
# can go wrong falls back to one GET whose error is the one a whole read
# gives: faults on the way, a server that ignores Range, an object shorter
# or longer than the manifest says, a missing one.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
if ! have_numpy; then
    skip "chunk parts" "needs numpy: python3 -m pip install numpy"
    exit 0
fi
s3_start
s3_mkbucket lake

# 30 samples of 1 MiB: a 24 MiB chunk (three parts) and a 6 MiB one
python3 - "$T/src" <<'PY'
import os, sys
import numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(3)
for i in range(30):
    np.save(os.path.join(sys.argv[1], "%04d.x.npy" % i), rng.integers(0, 255, 1 << 20, dtype=np.uint8))
PY
DS=s3://lake/parts
ok "create a dataset of 1 MiB samples in 24 MiB chunks" dlk create "$DS" --tensor x:u8:1048576 --chunk-size 24M
ok "ingest the 30 samples" dlk ingest "$DS" from-dir "$T/src"
ok "ls: two chunks" dlk ls "$DS" --json
check "... of 24 and 6 samples" python3 -c '
import json, sys; t = json.load(open(sys.argv[1]))["tensors"][0]
assert t["chunks"] == 2 and t["samples"] == 30, t' "$OUT"
same() { # URL: every sample equals its .npy
    local i
    for i in 0 5 23 24 29; do
        "$DLK" cat "$1" x $i --npy > "$T/s.npy" || return 1
        python3 -c 'import numpy as np, sys; sys.exit(not (np.load(sys.argv[1]) == np.load(sys.argv[2])).all())' \
            "$T/s.npy" "$T/src/$(printf %04d $i).x.npy" || return 1
    done
}
check "samples of both chunks equal their .npy files" same "$DS"
ok "bench-stream (every chunk's checksum verified)" dlk bench-stream "$DS" --device cpu --batch-size 5 --json
cp "$OUT" "$T/b.json"
check "... the checksums are equal" grep -q '"checksum_ok": true' "$T/b.json"
check "... read 30 MiB in at least four GETs (three parts and a chunk)" python3 -c '
import json, sys; e = json.load(open(sys.argv[1]))["epochs"][0]
assert e["requests"] >= 4 and e["bytes_read"] >= 30 << 20, e' "$T/b.json"
ok "verify --deep" dlk verify "$DS" --deep

# faults on the way: resets and truncated bodies, retried part by part
s3_proxy_start --rate-reset 0.2 --rate-truncate 0.2 --seed 7
PROXY=http://127.0.0.1:$S3_PROXY_PORT
check "through resets and truncations: the same bytes" env AWS_ENDPOINT_URL=$PROXY bash -c "$(declare -f same); DLK=$DLK T=$T same $DS"
ok "... and bench-stream's checksums" env AWS_ENDPOINT_URL=$PROXY "$DLK" bench-stream "$DS" --device cpu --batch-size 5 --json
check "... equal" grep -q '"checksum_ok": true' "$OUT"

# a server that answers every GET with the whole object
s3_proxy_start --ignore-range
PROXY=http://127.0.0.1:$S3_PROXY_PORT
check "a server that ignores Range: the same bytes (one GET instead)" env AWS_ENDPOINT_URL=$PROXY bash -c "$(declare -f same); DLK=$DLK T=$T same $DS"
ok "... and bench-stream's checksums" env AWS_ENDPOINT_URL=$PROXY "$DLK" bench-stream "$DS" --device cpu --batch-size 5 --json
check "... equal, with one request more than in parts: the GET after them" python3 -c '
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert b["checksum_ok"] and b["epochs"][0]["requests"] == a["epochs"][0]["requests"] + 1, (a["epochs"], b["epochs"])' "$T/b.json" "$OUT"

# the big chunk's object replaced: shorter, longer, gone
key=$(python3 - "$DS" <<'PY'
import json, os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
m = json.loads(s3.get_object(Bucket="lake", Key="parts/staging/manifest.json")["Body"].read())
print(m["tensors"][0]["chunks"][0][0])
PY
)
obj=parts/chunks/x/$key
put_obj() { # BYTES: the chunk object cut or grown to BYTES
    python3 - "$obj" "$1" <<'PY'
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
b = s3.get_object(Bucket="lake", Key=sys.argv[1])["Body"].read()
n = int(sys.argv[2])
s3.put_object(Bucket="lake", Key=sys.argv[1], Body=(b + b"\0" * n)[:n])
PY
}
size=$(python3 -c 'import os, boto3, sys; print(boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).head_object(Bucket="lake", Key=sys.argv[1])["ContentLength"])' "$obj")
ok "the chunk object cut short by 1 MiB" put_obj $((size - 1048576))
fails "reading it fails" 3 dlk cat "$DS" x 0 --npy
check "... saying how many bytes it has and the manifest says" grep -q "object has $((size - 1048576)) bytes, the manifest says $size" "$ERR"
ok "the chunk object grown by 1 byte" put_obj $((size + 1))
fails "reading it fails" 3 dlk cat "$DS" x 0 --npy
check "... saying it is larger than the manifest says" grep -q "chunk '.*$key'" "$ERR"
ok "the chunk object removed" python3 -c 'import os, boto3, sys; boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).delete_object(Bucket="lake", Key=sys.argv[1])' "$obj"
fails "reading it fails" 3 dlk cat "$DS" x 0 --npy
check "... naming the missing object" grep -q "$key" "$ERR"
