#!/usr/bin/env bash
# t411-store-links.sh - a local dataset holding symbolic links or special
# files below its root: dlk follows no link there (a chunk directory
# linked elsewhere gets no chunk written through it, a linked manifest,
# reference or chunk is not read) and opens no FIFO for reading (the
# command fails at once instead of blocking).  Each is refused with exit
# 3 and an error naming the path and what it is.  The root itself may be
# a link.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "store links" "numpy missing: python3 -m pip install numpy"; exit 0; }

mkdir -p "$T/src" "$T/src2" "$T/elsewhere"
python3 - "$T/src" "$T/src2" <<'PY'
import numpy as np, sys
for i in range(8):
    np.save("%s/%d.x.npy" % (sys.argv[1 + i // 4], i), np.full(4, i, np.float32))
PY
fresh() { # NAME: a dataset of 4 rows, committed
    rm -rf "$T/$1"
    "$DLK" create "$T/$1" from-dir "$T/src" --tensor x:f32:4 --quiet &&
        "$DLK" commit "$T/$1" -m one >/dev/null
}

fresh ds
ln -s "$T/ds" "$T/root-link"
ok "the root may be a symbolic link" dlk verify "$T/root-link" --deep

# a tensor's chunk directory linked to a folder outside the dataset
fresh ds
mv "$T/ds/chunks/x" "$T/elsewhere/x" && ln -s "$T/elsewhere/x" "$T/ds/chunks/x"
before=$(ls "$T/elsewhere/x" | wc -l)
fails "ingest into a linked chunk directory is refused" 3 timeout 30 "$DLK" ingest "$T/ds" from-dir "$T/src2"
check "the error names the link" grep -q "'$T/ds/chunks/x' is a symbolic link" "$ERR"
check "no chunk was written through it" test "$(ls "$T/elsewhere/x" | wc -l)" = "$before"
fails "reading a chunk through it is refused" 3 "$DLK" cat "$T/ds" x 0
check "naming the link" grep -q "'$T/ds/chunks/x' is a symbolic link" "$ERR"

# the head manifest a link to a file outside
fresh ds
mv "$T/ds/staging/manifest.json" "$T/elsewhere/manifest.json"
ln -s "$T/elsewhere/manifest.json" "$T/ds/staging/manifest.json"
fails "a linked manifest is not read" 3 "$DLK" ls "$T/ds"
check "the error names it as a link" grep -q "'$T/ds/staging/manifest.json' is a symbolic link" "$ERR"

# a linked folder above the manifest
fresh ds
mv "$T/ds/staging" "$T/elsewhere/staging" && ln -s "$T/elsewhere/staging" "$T/ds/staging"
fails "a linked staging folder is not read" 3 "$DLK" ls "$T/ds" --json
check "the --json error names it" grep -q "'$T/ds/staging' is a symbolic link" "$OUT"

# main a link to another dataset's reference
fresh ds
fresh other
rm "$T/ds/refs/heads/main" && ln -s "$T/other/refs/heads/main" "$T/ds/refs/heads/main"
fails "a linked reference is not read" 3 "$DLK" log "$T/ds"
check "naming it" grep -q "'$T/ds/refs/heads/main' is a symbolic link" "$ERR"

# a FIFO in place of dlk.json and of a chunk: no command blocks
fresh ds
rm "$T/ds/dlk.json" && mkfifo "$T/ds/dlk.json"
fails "a FIFO for dlk.json fails at once" 3 timeout 20 "$DLK" ls "$T/ds"
check "naming it as a FIFO" grep -q "'$T/ds/dlk.json': it is a FIFO" "$ERR"
fresh ds
chunk=$(ls "$T/ds/chunks/x" | head -1)
rm "$T/ds/chunks/x/$chunk" && mkfifo "$T/ds/chunks/x/$chunk"
fails "verify --deep over a FIFO chunk fails, not blocks" 1 timeout 20 "$DLK" verify "$T/ds" --deep
check "the problem names the FIFO" grep -q "chunks/x/$chunk': it is a FIFO" "$OUT"
fails "cat of a sample in it fails at once" 3 timeout 20 "$DLK" cat "$T/ds" x 0 --raw
check "naming it" grep -q "it is a FIFO" "$ERR"
