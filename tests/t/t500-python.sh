#!/usr/bin/env bash
# t500-python.sh - the Python package: `pip install` from a copy of the
# sources holding no build output (it builds libdlk.so and the dlk
# binary from them, the one build of this test; the package's dlk
# command runs that binary), then tests/python/test_dlk.py on the cpu
# device: values against `dlk cat --npy` for every tensor kind, shuffle,
# sharding over 2 and 3 ranks, resume in a new process, errors, batch
# memory held across next(), Ctrl-C, the resident vector index against
# dlk query --near and numpy, and an s3:// dataset on moto; then
# tests/python/test_frameworks.py: the loader driven as Lightning's fit
# and validation loops, its DDP launcher, ddp_spawn's pickling, torch's
# and accelerate's batch transfer and gather_for_metrics drive it.
# Also: with DLK_LIBDIR, the libraries bundled beside libdlk.so travel in
# the package.  Under SAN=1 the binding is installed over the sanitized
# libdlk.so of the build under test instead, and Python runs with the
# ASan runtime.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

py_need "python package" || exit 0

# the sources as a fresh checkout has them: no build/, no objects
ok "copy the sources" py_sources "$T/clone"
run_py=(python3)
if [ -n "${SAN:-}" ] && [ "$SAN" != thread ]; then
    # under the sanitizers: the binding over the sanitized libdlk.so of
    # this build (the sources' own build ran in the plain pass), with the
    # ASan runtime loaded first
    ok "pip install the binding over $DLK_BUILD/libdlk.so" env DLK_LIBDIR="$DLK_BUILD" \
        python3 -m pip install --no-build-isolation --no-deps --no-cache-dir \
        --target "$T/py" "$T/clone/python"
    run_py=(env LD_PRELOAD="$(cc -print-file-name=libasan.so)" PYTHONMALLOC=malloc
            ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 python3)
else
    ok "pip install builds libdlk.so and the binding" env DLK_MAKE_JOBS=2 \
        python3 -m pip install --no-build-isolation --no-deps --no-cache-dir \
        --target "$T/py" "$T/clone/python"
fi
check "the package carries the library, soname libdlk.so.1" \
    test -f "$T/py/dlk/libdlk.so.1"
check "and the dlk binary built with it, which its dlk command runs" sh -c \
    'test -x "$1/dlk/bin/dlk" && PYTHONPATH="$1" "$1/bin/dlk" --version | grep -q "^dlk "' sh "$T/py"
# (less the version nodes' own names, type A: tests/t/t600-abi.sh)
check "the library exports only dlk_ functions" sh -c \
    'nm -D --defined-only "$1" | awk "\$2 != \"A\" {print \$3}" | sed "s/@.*//" | grep -v "^dlk_" | grep . && exit 1; \
     nm -D --defined-only "$1" | grep -q " dlk_loader_keep@@DLK_0$"' sh "$T/py/dlk/libdlk.so.1"

# DLK_LIBDIR over a folder that bundles a library libdlk needs, as `make
# dist` does for machines without them: the package carries that library
# and the binding loads it from there, not from the system
if [ -z "${SAN:-}" ]; then
    jansson=$(ldd "$T/py/dlk/libdlk.so.1" | awk '$1 == "libjansson.so.4" {print $3}')
    mkdir -p "$T/bundle"
    ok "a folder with libdlk.so.1 and the libjansson.so.4 it needs" \
        cp "$T/py/dlk/libdlk.so.1" "$jansson" "$T/bundle/"
    ok "pip install with DLK_LIBDIR over that folder" env DLK_LIBDIR="$T/bundle" \
        python3 -m pip install --no-build-isolation --no-deps --no-cache-dir \
        --target "$T/py2" "$T/clone/python"
    check "the package carries the bundled library" test -f "$T/py2/dlk/libjansson.so.4"
    check "import dlk loads the bundled library from the package" \
        env PYTHONPATH="$T/py2" python3 -c 'import sys, dlk
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libjansson" in l]
sys.exit(not maps or any(not m.startswith(sys.argv[1]) for m in maps))' "$T/py2/dlk/"
fi

python3 - "$T/src" <<'PY'
import os, sys, numpy as np
out = sys.argv[1]
os.makedirs(out)
rng = np.random.default_rng(500)
for i in range(50):
    p = os.path.join(out, "%06d" % i)
    np.save(p + ".images.npy", rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
    np.save(p + ".labels.npy", np.int32(i % 3))
    np.save(p + ".boxes.npy", rng.random((1 + i % 4, 4), dtype=np.float32))
    np.save(p + ".clip.npy", rng.integers(0, 255, (1 + i % 3, 4, 4, 3), dtype=np.uint8))
    np.save(p + ".text.npy", np.frombuffer(b"row %d" % i * (1 + i % 2), dtype=np.uint8))
    np.save(p + ".emb.npy", rng.random(5).astype(np.float16))
    np.save(p + ".mask.npy", rng.random(3) > 0.5)
    np.save(p + ".big.npy", rng.integers(-2**60, 2**60, (2,), dtype=np.int64))
PY
make_ds() { # URL
    dlk create "$1" --tensor images:u8:8x8x3 --tensor labels:i32 \
        --tensor 'boxes:f32:?x4:zstd' --tensor 'clip:u8:?x4x4x3' --kind clip=video \
        --tensor 'text:u8:?' --kind text=text --tensor emb:f16:5 \
        --tensor mask:bool:3 --tensor big:i64:2:zstd --classes labels=a,b,c \
        --chunk-size 2K >/dev/null &&
        dlk ingest "$1" from-dir "$T/src" --quiet && dlk commit "$1" -m first >/dev/null
}
ok "a dataset of every tensor kind" make_ds "$T/ds"
s3_start
s3_mkbucket dlk-t500
ok "the same dataset on s3" make_ds s3://dlk-t500/ds

# every chunk read held back a minute (a stalled store), for Ctrl-C
s3_proxy_start --slow-path '/chunks/' --slow-ms 60000

# TAP lines of its own: passed through
PYTHONPATH="$T/py" "${run_py[@]}" "$DLK_TESTS/python/test_dlk.py" "$T/ds" \
    s3://dlk-t500/ds "http://127.0.0.1:$S3_PROXY_PORT"
rc=$?
[ $rc = 0 ] || echo "not ok - tests/python/test_dlk.py exited $rc"

# the calls Lightning, accelerate and torch make, modelled without torch
PYTHONPATH="$T/py" "${run_py[@]}" "$DLK_TESTS/python/test_frameworks.py" "$T/ds"
rc=$?
[ $rc = 0 ] || echo "not ok - tests/python/test_frameworks.py exited $rc"
