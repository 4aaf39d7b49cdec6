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

if ! have_numpy; then
    skip "augment" "numpy missing: python3 -m pip install numpy"
    exit 0
fi
if ! python3 -c 'import setuptools, wheel, pip' 2>/dev/null; then
    skip "augment" "pip, setuptools or wheel missing: python3 -m pip install setuptools wheel"
    exit 0
fi
repo=$(cd "$DLK_TESTS/.." && pwd)
mkdir -p "$T/clone"
ok "copy the binding's sources" sh -c 'cd "$1" && tar cf - --exclude=build \
    --exclude="*.so*" --exclude="*.egg-info" --exclude=__pycache__ python include \
    Makefile cmd/store_env.c cmd/store_env.h |
    tar xf - -C "$2"' sh "$repo" "$T/clone"
ok "pip install the binding over $DLK_BUILD/libdlk.so" env DLK_LIBDIR="$DLK_BUILD" \
    python3 -m pip install --no-build-isolation --no-deps --no-cache-dir \
    --target "$T/py" "$T/clone/python"
run_py=(python3)
if [ -n "${SAN:-}" ] && [ "$SAN" != thread ]; then
    run_py=(env LD_PRELOAD="$(cc -print-file-name=libasan.so)" PYTHONMALLOC=malloc
            ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 python3)
fi

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
