#!/usr/bin/env bash
# Small appends do not fragment a dataset: one-row ingests (.npy, and
# images through the staged runs and their merge) join each tensor's
# small last chunks once the new ones hold as many bytes, so every chunk
# is full but a short tail of ever smaller ones (a fixed shape, a variable
# one with zstd, a scalar); every commit made on the way still reads as it
# was; verify --all --deep passes, before and after gc.  dlk compact
# rewrites runs of small chunks into full ones, samples unchanged.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "append fill" "numpy missing: python3 -m pip install numpy"; exit 0; }
# (tests/unit/test_fill.c makes 300 appends through the library; here
# DLK_TEST_APPENDS=300 makes as many ingests, about 10 s more)
if [ "${DLK_TEST_STORE:-file}" != file ]; then N=${DLK_TEST_APPENDS:-20} M=7
else N=${DLK_TEST_APPENDS:-100} M=16; fi
EVERY=$((N / 5))

# Row i of each tensor: labels i32 = 3i+1, tok u16 [1 + i%5] of i+k,
# img u8 2x2x4 of (i+k)%256.  `row.py DIR FIRST COUNT` writes them as one
# .npy file per tensor and row; `row.py check ...` compares what dlk cat
# printed with them.
cat > "$T/row.py" <<'PY'
import numpy as np, os, sys
def row(t, i):
    if t == "labels": return np.array(3 * i + 1, "<i4")
    if t == "tok": return np.array([(i + k) % 65536 for k in range(1 + i % 5)], "<u2")
    return np.array([(i + k) % 256 for k in range(16)], "u1").reshape(2, 2, 4)
if sys.argv[1] == "check":   # FILE: lines "tensor index" then the raw bytes' hex
    bad = 0
    for line in open(sys.argv[2]):
        t, i, hexed = line.split()
        if row(t, int(i)).tobytes().hex() != hexed:
            print("# %s %s differs" % (t, i)); bad += 1
    sys.exit(1 if bad else 0)
if sys.argv[1] == "sizes":   # MANIFEST TARGET: full chunks, then a short tail
    # Every chunk is full (the next sample would not have fit) up to a
    # tail of small ones, each smaller than the one before (a small chunk
    # is joined by the new ones once they hold as many bytes), so at most
    # log2(target / smallest sample) + 2 of them.
    import json, math
    m = json.load(open(sys.argv[2])); target = int(sys.argv[3])
    for t in m["tensors"]:
        if t["name"] not in ("labels", "tok", "img"): continue
        first, ch, small = 0, t["chunks"], []
        smallest = min(row(t["name"], i).nbytes for i in range(5))
        print("# %s: %d samples in %d chunks" % (t["name"], t["samples"], len(ch)))
        for k, (h, n, stored, raw) in enumerate(ch):
            assert raw == sum(row(t["name"], first + j).nbytes for j in range(n)), (t["name"], k)
            first += n
            full = k + 1 < len(ch) and raw + row(t["name"], first).nbytes > target
            if small and full:
                sys.exit("%s: chunk %d of %d is full after small ones" % (t["name"], k, len(ch)))
            if not full:
                if small and raw >= small[-1]:
                    sys.exit("%s: small chunk %d of %d (%d bytes) not below the one before (%d)" % (t["name"], k, len(ch), raw, small[-1]))
                small.append(raw)
        bound = int(math.log2(target / smallest)) + 2
        print("# %s: tail of %d small chunks %s" % (t["name"], len(small), small))
        if len(small) > bound:
            sys.exit("%s: %d small chunks at the end, over %d" % (t["name"], len(small), bound))
    sys.exit(0)
d, a, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(a, a + n):
    os.makedirs("%s/%04d" % (d, i), exist_ok=True)
    for t in ("labels", "tok", "img"):
        np.save("%s/%04d/%04d.%s.npy" % (d, i, i, t), row(t, i))
PY
# cat_rows DS REF ROWS...: "tensor index hex" of each tensor's rows at REF
cat_rows() {
    local ds=$1 at=$2 t i; shift 2
    for i in "$@"; do for t in labels tok img; do
        printf '%s %s %s\n' "$t" "$i" "$("$DLK" cat "$ds" "$t" "$i" ${at:+--at "$at"} --raw | od -An -v -tx1 | tr -d ' \n')"
    done; done
}

DS=$(ds_url fill)
ok "create" dlk create "$DS" --tensor labels:i32 --tensor 'tok:u16:?:zstd' \
    --tensor img:u8:2x2x4 --chunk-size 256
python3 "$T/row.py" "$T/rows" 0 "$N"
: > "$T/commits"
t0=$SECONDS failed=0
for ((i = 0; i < N; i++)); do
    "$DLK" ingest "$DS" from-dir "$T/rows/$(printf %04d $i)" --quiet || failed=$((failed + 1))
    if [ $(((i + 1) % EVERY)) = 0 ]; then
        echo "$("$DLK" commit "$DS" -m "rows to $i") $((i + 1))" >> "$T/commits"
    fi
done
echo "# $N one-row ingests in $((SECONDS - t0)) s"
check "$N one-row ingests" test "$failed" = 0
obj_get "$DS" staging/manifest.json "$T/head.json"
check "full chunks, then a short tail of ever smaller ones" python3 "$T/row.py" sizes "$T/head.json" 256
cat_rows "$DS" "" 0 1 $((N / 2)) $((N - 2)) $((N - 1)) > "$T/head.txt"
check "the head reads back" python3 "$T/row.py" check "$T/head.txt"
ok "verify --all --deep" dlk verify "$DS" --all --deep --json
check "every commit checked" python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["ok"] and d["commits_checked"] == int(sys.argv[2]), d' "$OUT" "$((N / EVERY))"

commits_read() { # every commit reads its first, middle and last rows
    local id n
    while read -r id n; do
        cat_rows "$DS" "$id" 0 $((n / 2)) $((n - 1))
        "$DLK" cat "$DS" labels "$n" --at "$id" >/dev/null 2>&1 && echo "commit $id has a row $n"
    done < "$T/commits" > "$T/at.txt"
    python3 "$T/row.py" check "$T/at.txt"
}
check "every commit still reads as it was" commits_read
ok "gc --grace 0" dlk gc "$DS" --grace 0 --json
check "gc removed the replaced chunks" python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["removed"] > 0 and d["referenced"] > 0, d' "$OUT"
ok "verify --all --deep after gc" dlk verify "$DS" --all --deep
check "after gc, every commit still reads as it was" commits_read

# Images through the staged run and its merge, one per ingest; the same
# samples as one ingest of them all.
command -v ffmpeg >/dev/null || { skip "staged one-image ingests" "ffmpeg missing"; exit 0; }
mkdir -p "$T/all/c"
ff -f lavfi -i "testsrc2=s=64x64:r=1" -frames:v "$M" -start_number 0 "$T/all/c/%03d.png"
for ((i = 0; i < M; i++)); do
    mkdir -p "$T/img/$i/c"
    cp "$T/all/c/$(printf %03d $i).png" "$T/img/$i/c/"
done
IM=$(ds_url images)
ok "create from the first image" dlk create "$IM" from-dir "$T/img/0" --resize 8x8 --chunk-size 1K --quiet
failed=0
for ((i = 1; i < M; i++)); do
    "$DLK" ingest "$IM" from-dir "$T/img/$i" --resize 8x8 --quiet || failed=$((failed + 1))
    [ $i = $((M / 2)) ] && ok "commit half-way" dlk commit "$IM" -m half
done
check "$M one-image ingests" test "$failed" = 0
ok "ls" dlk ls "$IM" --json
check "images: $M samples in at most $(((M + 4) / 5 + 2)) chunks (5 a chunk, a tail of 4, 2 and 1)" python3 -c 'import json,sys
t=[t for t in json.load(open(sys.argv[1]))["tensors"] if t["name"]=="images"][0]
assert t["samples"] == int(sys.argv[2]) and t["chunks"] <= (int(sys.argv[2]) + 4) // 5 + 2, t' "$OUT" "$M"
ok "one ingest of every image, in sorted order" dlk create "$(ds_url ref)" from-dir "$T/all" --resize 8x8 --order sorted --quiet
# keys and versions: the copies have other paths and mtimes
dump "$IM" key key_version > "$T/im.txt"
dump "$(ds_url ref)" key key_version > "$T/ref.txt"
check "the same samples as one ingest of them all" cmp "$T/im.txt" "$T/ref.txt"
check "$M different images" test "$(grep '^images' "$T/im.txt" | cut -d' ' -f3 | sort -u | wc -l)" = "$M"
ok "verify --all --deep" dlk verify "$IM" --all --deep
ok "the half-way commit" dlk cat "$IM" images $((M / 2)) --at main --raw
check "reads as the same image" sh -c "'$DLK' cat '$(ds_url ref)' images $((M / 2)) --raw | cmp - '$OUT'"
fails "the half-way commit has no more rows" 3 dlk cat "$IM" images $((M / 2 + 1)) --at main

# dlk compact: 300 labels in chunks of 16, rewritten into chunks of 1 KiB
CP=$(ds_url compact)
ok "create" dlk create "$CP" --tensor labels:i32 --chunk-size 64
mkdir -p "$T/batch"
python3 -c 'import numpy as np,sys; np.save(sys.argv[1], (3 * np.arange(300) + 1).astype("<i4"))' "$T/batch/b.labels.npy"
ok "ingest 300 labels" dlk ingest "$CP" from-dir "$T/batch" --quiet
ok "commit" dlk commit "$CP" -m "chunks of 16"
fails "compact without a dataset" 2 dlk compact
fails "compact --target-size x" 2 dlk compact "$CP" --target-size x
fails "compact of no dataset" 3 dlk compact "$T/none"
ok "compact --help" dlk compact --help
check "--help names --target-size" grep -q -- --target-size "$OUT"
ok "compact --target-size 1K" dlk compact "$CP" --target-size 1K --json
check "19 chunks of 16 rows (one of 12) into 2" python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert (d["chunks_before"], d["chunks_read"], d["chunks_written"], d["chunks_after"]) == (19, 19, 2, 2), d' "$OUT"
obj_get "$CP" staging/manifest.json "$T/cp.json"
check "chunks of 256 and 44 rows" python3 -c 'import json,sys
c=json.load(open(sys.argv[1]))["tensors"][0]["chunks"]; assert [x[1] for x in c] == [256, 44], c' "$T/cp.json"
check "the same labels in the same order" sh -c "for i in 0 15 16 255 256 299; do '$DLK' cat '$CP' labels \$i --raw | od -An -tx1; done > '$T/c1.txt';
    for i in 0 15 16 255 256 299; do '$DLK' cat '$CP' labels \$i --raw --at main | od -An -tx1; done > '$T/c2.txt'; cmp '$T/c1.txt' '$T/c2.txt'"
ok "a second compact" dlk compact "$CP" --target-size 1K --json
check "rewrites nothing" python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["chunks_written"] == 0 and d["chunks_after"] == 2, d' "$OUT"
ok "gc --grace 0" dlk gc "$CP" --grace 0
ok "verify --all --deep after compact and gc" dlk verify "$CP" --all --deep --json
check "no problems in the commit or the head" python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["ok"] and d["commits_checked"] == 1 and d["chunks_checked"] == 21, d' "$OUT"

# Small appends cost what they add: 15000 labels (60,000 B, below the
# 64 KiB chunk size), then 8 one-row ingests each followed by a commit.
# Joining the last chunk whatever its size rewrote it every time, and
# every commit kept each copy: 480 KB of chunks for 32 new bytes.
SM=$(ds_url small)
ok "create, 64 KiB chunks" dlk create "$SM" --tensor labels:i32 --chunk-size 64K --no-key
mkdir -p "$T/sm/0"
python3 -c 'import numpy as np,sys; np.save(sys.argv[1], np.arange(15000).astype("<i4"))' "$T/sm/0/b.labels.npy"
ok "ingest 15000 labels" dlk ingest "$SM" from-dir "$T/sm/0" --quiet
: > "$T/sm.ids"
failed=0
for ((i = 1; i <= 8; i++)); do
    mkdir -p "$T/sm/$i"
    python3 -c 'import numpy as np,sys; np.save(sys.argv[1], np.array([int(sys.argv[2])], "<i4"))' "$T/sm/$i/b.labels.npy" $((15000 + i - 1))
    "$DLK" ingest "$SM" from-dir "$T/sm/$i" --quiet || failed=$((failed + 1))
    "$DLK" commit "$SM" -m "row $i" >> "$T/sm.ids" || failed=$((failed + 1))
done
check "8 one-row ingests and commits" test "$failed" = 0
for id in $(cat "$T/sm.ids"); do obj_get "$SM" "commits/$id.json" "$T/sm-$id.json"; done
check "the commits name under 100 KB of chunks in all" python3 -c 'import json,sys
seen = {}
for f in sys.argv[1:]:
    for t in json.load(open(f))["tensors"]:
        for h, n, whole, raw in t["chunks"]:
            seen[(t["name"], h)] = whole
total = sum(seen.values())
print("# %d distinct chunks, %d bytes" % (len(seen), total))
assert total < 100000, total' "$T"/sm-*.json
ok "the last commit reads every label" dlk cat "$SM" labels 15007 --raw --at main
check "row 15007 holds 15007" python3 -c 'import struct,sys; assert struct.unpack("<i", open(sys.argv[1],"rb").read()) == (15007,)' "$OUT"
