#!/usr/bin/env bash
# t481-python-mix.sh - dlk.Loader over a list of (dataset, weight[,
# view]) sources (tests/python/test_mix.py on the cpu device): each
# batch's counts by weight, batch.source, resume mid-epoch in the same
# world and from two ranks into three (each source's rows once), pickling,
# determinism, a source's view, epoch_size, and what is refused.  The
# binding is installed over this build's libdlk.so; under SAN=1 Python
# runs with the ASan runtime.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/mixlib.sh"
mix_need "python mixing loader"
if ! python3 -c 'import setuptools, wheel, pip' 2>/dev/null; then
    skip "python mixing loader" "pip, setuptools or wheel missing: python3 -m pip install setuptools wheel"
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

mix_tree "$T/sa" 10 300 11
mix_tree "$T/sb" 10 100 12
mix_tree "$T/sc" 10 10 13
for s in a b; do
    ok "create $s" dlk create "$T/$s" from-dir "$T/s$s" --resize 16x16 --chunk-size 64K --part-size 4K --order sorted --json
done
ok "create c at 8x8" dlk create "$T/c" from-dir "$T/sc" --resize 8x8 --json
ok "a view of b" dlk query "$T/b" "labels < 3" --save-view low --json

PYTHONPATH="$T/py:$DLK_TESTS/python" "${run_py[@]}" \
    "$DLK_TESTS/python/test_mix.py" "$T/a" "$T/b" "$T/c"
rc=$?
[ $rc = 0 ] || echo "not ok - tests/python/test_mix.py exited $rc"
