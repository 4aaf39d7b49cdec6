#!/usr/bin/env bash
# A view streamed from chunks with part checksums reads only the parts
# that hold its rows (formats/dlk-v1.md 6.10), locally and on S3 (moto):
# bench-stream --view's bytes_loaded stay within a part a row, far under
# the chunks holding the rows, and bytes_read too; it streams exactly the
# view's rows, on two ranks too.  A damaged part that holds a view row stops the stream naming
# the chunk and the part; one that holds none is not read: the view
# streams, the whole dataset does not.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
have_numpy || { skip "views read by part" "numpy missing: python3 -m pip install numpy"; exit 0; }

# 640 rows of 1000 bytes, each starting with its row number (u64 LE, so
# that a row is found in a chunk by its bytes), in chunks of 64 KiB cut
# into parts of 4 KiB (4 or 5 rows each), and their i64 labels
N=640
mkdir -p "$T/src"
python3 - "$T/src" "$N" <<'PY'
import numpy as np, sys
d, n = sys.argv[1], int(sys.argv[2])
v = np.random.default_rng(3).integers(0, 255, (n, 1000), dtype="u1")
v[:, :8] = np.arange(n, dtype="<u8").view("u1").reshape(n, 8)
np.save(d + "/0000.vec.npy", v)
np.save(d + "/0000.labels.npy", np.arange(n, dtype="<i8"))
PY
make_ds() { # URL
    dlk create "$1" --tensor vec:u8:1000 --tensor labels:i64 \
        --chunk-size 64K --part-size 4096 &&
        dlk ingest "$1" from-dir "$T/src" --quiet &&
        dlk query "$1" "row % 37 == 5" --save-view sparse &&
        dlk query "$1" "row >= 100 and row < 260" --save-view range
}
# bench-stream --view V's report (in $OUT) against what the view's rows
# need: of the sparse view (no two rows in a part) bytes_loaded at most a
# part of vec (5 rows) a row plus the labels' one part (all 640 of them),
# under a third of the bytes of the vec chunks that hold the rows (dlk ls
# --view); of the range its rows' bytes and a few parts, fewer than the
# chunks'; bytes_read those and the chunks' headers (half the chunks'
# bytes of the sparse view)
bytes_ok() { # URL VIEW
    python3 - "$OUT" "$DLK" "$1" "$2" "$N" <<'PY'
import json, subprocess, sys
r = json.load(open(sys.argv[1]))
dlk, ds, view, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
ls = json.loads(subprocess.check_output([dlk, "ls", ds, "--view", view, "--json"]))
rows = ls["view"]["rows"]
chunks = [t for t in ls["tensors"] if t["name"] == "vec"][0]["stored_bytes"]
if view == "sparse":  # no two rows in a part: a part a row
    most, share = rows * 5 * 1000 + n * 8, 3
else:  # a range: its rows, and at each end a part and a span's rest
    most, share = (rows + 2 * 4 * 5) * 1000 + n * 8, 1
assert r["samples"] == rows, (r["samples"], rows)
assert r["bytes_loaded"] <= most, (r["bytes_loaded"], most)
assert share * r["bytes_loaded"] < chunks, (r["bytes_loaded"], chunks)
# the store's bytes: the loads, each chunk's header and index, and the
# dataset's documents (a few KiB)
assert r["bytes_read"] <= r["bytes_loaded"] + 64 * 1024, r["bytes_read"]
assert (share + 1) // 2 * r["bytes_read"] < chunks, (r["bytes_read"], chunks)
print(view, rows, "rows:", r["bytes_loaded"], "bytes loaded,", r["bytes_read"],
      "read,", r["requests"], "requests; the chunks holding them", chunks)
PY
}
rows_ok() { # URL VIEW ORDER
    python3 - "$DLK" "$1" "$2" "$3" <<'PY'
import json, subprocess, sys
dlk, ds, view, order = sys.argv[1:5]
want = json.loads(subprocess.check_output([dlk, "query", ds, "--view", view, "--json"]))["rows"]
got = sorted(int(x) for l in open(order) for x in l.split())
assert got == want and want, (got, want)
PY
}

stream_checks() { # URL WHERE
    local v
    for v in sparse range; do
        ok "$2: bench-stream --view $v" dlk bench-stream "$1" --view $v \
            --device cpu --batch-size 4 --shuffle --epochs 1 --json \
            --order-out "$T/$v.order"
        check "$2: $v reads the parts holding its rows" bytes_ok "$1" $v
        check "$2: $v streams exactly its rows" rows_ok "$1" $v "$T/$v.order"
    done
    ok "$2: the sparse view over two ranks" dlk bench-stream "$1" \
        --view sparse --device cpu --batch-size 2 --shuffle --world 2 \
        --rank 1 --epochs 1 --json
    check "$2: rank 1's share, within its parts" python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); assert 0 < r["bytes_loaded"] <= r["samples"] * 5000 + 640 * 8, r["bytes_loaded"]' "$OUT"
}

L=$T/local
ok "create a local dataset" make_ds "$L"
stream_checks "$L" local

s3_start
s3_mkbucket dlk-t176
S=s3://dlk-t176/ds
ok "create it on s3" make_ds "$S"
stream_checks "$S" s3

# --- damaged parts, locally -------------------------------------------
# flip a byte of row R's bytes in its vec chunk (found by the row's
# first 8 bytes): prints the chunk's name
flip_row() { # ROW
    python3 - "$L/chunks/vec" "$1" <<'PY'
import os, struct, sys
d, row = sys.argv[1], int(sys.argv[2])
for f in sorted(os.listdir(d)):
    b = bytearray(open(os.path.join(d, f), "rb").read())
    at = b.find(struct.pack("<Q", row))
    # the row's bytes start on a 1000-byte boundary of the payload
    index_bytes, = struct.unpack_from("<Q", b, 16)
    while at >= 0 and (at - 64 - index_bytes) % 1000:
        at = b.find(struct.pack("<Q", row), at + 1)
    if at >= 0:
        b[at + 500] ^= 0x5a
        open(os.path.join(d, f), "wb").write(b)
        print(f)
        break
else:
    sys.exit("row %d not found" % row)
PY
}
# row 12: in the span of 4 parts (16 rows at least) that holds the
# sparse view's row 5, in a part without it (parts hold 4 or 5 rows)
ok "damage a part holding none of the view's rows" flip_row 12
ok "the view streams: that part is not read" dlk bench-stream "$L" \
    --view sparse --device cpu --batch-size 4 --epochs 1 --json
fails "the whole dataset does not" 3 dlk bench-stream "$L" --device cpu \
    --batch-size 4 --epochs 1
check "naming the part" grep -q "part [0-9]* of [0-9]* .*checksum mismatch" "$ERR"
C=$(flip_row 42)
check "damage a part holding the view's row 42" test -n "$C"
fails "the view's stream stops" 3 dlk bench-stream "$L" --view sparse \
    --device cpu --batch-size 4 --epochs 1
check "naming the chunk and the part" grep -q "chunk 'chunks/vec/$C': part [0-9]* of [0-9]* .*checksum mismatch" "$ERR"
