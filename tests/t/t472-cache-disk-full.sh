#!/usr/bin/env bash
# t472-cache-disk-full.sh - the chunk cache on a full disk and on a
# read-only file system (a small tmpfs, as t410 mounts): bench-stream of
# an s3:// dataset (moto) with --cache-dir there and a limit far above
# the disk's size keeps what fits, then streams every other chunk from
# the store, every epoch whole and checked, with one warning naming the
# failed write; remounted read-only, the copies are still read and
# nothing is written, with one warning.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

have_numpy || { skip "the chunk cache on a full disk" "numpy missing: python3 -m pip install numpy"; exit 0; }
if [ "$(id -u)" != 0 ]; then
    skip "the chunk cache on a full disk" "mounting a small file system needs root (run the suite as root, e.g. sudo make test)"
    exit 0
fi
MNT=$T/mnt
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=256k,mode=0755 tmpfs "$MNT" 2>"$T/mount.err"; then
    skip "the chunk cache on a full disk" "'mount -t tmpfs' failed: $(head -c 200 "$T/mount.err")"
    exit 0
fi
at_exit "umount -l '$MNT' 2>/dev/null"

s3_start
s3_mkbucket dlk-t472
MOTO_LOG=$(ls "$T"/moto-*.log)
python3 - "$T/src" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(472)
for i in range(600):
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            rng.integers(0, 255, size=(24, 24, 3), dtype=np.uint8))
PY
ds=s3://dlk-t472/ds
ok "create" dlk create "$ds" --tensor images:u8:24x24x3 --chunk-size 64K
ok "ingest 600 samples (about 1 MiB)" dlk ingest "$ds" from-dir "$T/src" -q
gets() { grep -c '"GET /dlk-t472/ds/chunks/' "$MOTO_LOG"; }
stream() { # NAME ARGS...
    local name=$1; shift
    ok "$name" "$DLK" bench-stream "$ds" --device cpu --json --shuffle \
        --batch-size 100 --workers 4 --cache-dir "$MNT/cache" \
        --cache-limit 1G "$@"
    check "$name: checksum_ok, 600 samples an epoch" \
        test "$(json_field checksum_ok)/$(json_field samples)" = "True/$((600 * ${EPOCHS:-1}))"
}
g0=$(gets)
EPOCHS=2 stream "2 epochs, a cache on a 256 KiB disk" --epochs 2
kept=$(json_field cache.fetched)
check "some chunks were kept ($kept)" test "$kept" -gt 0
check "one warning, naming the write" \
    test "$(grep -c "warning: chunk cache '$MNT/cache' not written: cannot write in tmp/: No space left on device" "$ERR")" = 1
check "the report says so" grep -q '"warning": "chunk cache' "$OUT"
check "the second epoch read the chunks not kept from the store" \
    test "$(json_field epochs.1.requests)" -gt 0
check "no temp file left" test -z "$(ls "$MNT/cache/tmp")"

ok "remount read-only" mount -o remount,ro "$MNT"
g0=$(gets)
stream "a cache on a read-only file system"
check "the copies were read ($(json_field cache.hits) reads)" \
    test "$(json_field cache.hits)" -gt 0
check "one warning" test "$(grep -c 'warning: chunk cache' "$ERR")" = 1
check "it says why" grep -q 'Read-only file system' "$ERR"
mount -o remount,rw "$MNT"
