#!/usr/bin/env bash
# t540-augment.sh: the loader's per-sample augmentation on the cpu device, through
# the Python binding: tests/python/test_augment.py checks every sample of
# its batches against a numpy reference of torchvision's algorithm
# (crop box, antialiased bilinear resize, flip, jitter, normalisation,
# dtype), a video tensor (one crop for every frame of a clip), the same
# pixels for the same (seed, epoch) and after a resume,
# other crops in another epoch, and a bad spec naming its field; and
# dlk bench-stream --augment runs a spec and prints it.
. "$DLK_TESTS/lib.sh"

py_binding "augment" || exit 0

python3 - "$T/src" <<'PY'
import os, sys, numpy as np
out = sys.argv[1]
os.makedirs(out)
for i in range(40):
    rng = np.random.default_rng(i)
    h, w = 20 + (i * 7) % 23, 18 + (i * 11) % 31
    p = os.path.join(out, "%06d" % i)
    np.save(p + ".images.npy", rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    np.save(p + ".labels.npy", np.int32(i))
    np.save(p + ".clip.npy", rng.integers(0, 256, (2, h, w, 3), dtype=np.uint8))
PY
make_ds() {
    dlk create "$1" --tensor 'images:u8:?x?x3' --kind images=image \
        --tensor labels:i32 --tensor 'clip:u8:2x?x?x3' --kind clip=video \
        --chunk-size 8K >/dev/null &&
        dlk ingest "$1" from-dir "$T/src" --quiet &&
        dlk commit "$1" -m first >/dev/null
}
ok "a dataset of images of many sizes" make_ds "$T/ds"

PYTHONPATH="$T/py:$DLK_TESTS/python" "${run_py[@]}" \
    "$DLK_TESTS/python/test_augment.py" "$T/ds"
rc=$?
[ $rc = 0 ] || echo "not ok - tests/python/test_augment.py exited $rc"

out=$(dlk bench-stream "$T/ds" --device cpu --batch-size 8 --shuffle \
    --tensors images --augment imagenet-train,crop=32 2>&1)
check "bench-stream --augment runs and prints its spec" \
    grep -q "^  augment imagenet-train,crop=32$" <<<"$out"
check "and streams every sample" grep -q " 40 samples in 5 batches" <<<"$out"
check "bench-stream --augment with a bad field names it" sh -c \
    '"$1" bench-stream "$2" --device cpu --augment crop=8,flip=x 2>&1 |
     grep -q "field .flip."' \
    sh "$DLK_BUILD/dlk" "$T/ds"
