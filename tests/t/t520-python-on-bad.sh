#!/usr/bin/env bash
# t520-python-on-bad.sh - the Python loader's on_bad and max_bad over a
# dataset with one damaged part (tests/python/test_on_bad.py: raises by
# default; with skip the clean run's batches, the part's rows in none, a
# warning and loader.bad_reads naming the chunk, stats counting it;
# max_bad holds; both survive pickling), and dlk.torch.IterableDataset
# under torch's DataLoader and mp.spawn (tests/python/test_torch_data.py,
# where torch is importable).  The binding is installed over this
# build's libdlk.so (t500 tests the package's own build); under SAN=1
# Python runs with the ASan runtime.
. "$DLK_TESTS/lib.sh"

if ! have_numpy; then
    skip "python on_bad" "numpy missing: python3 -m pip install numpy"
    exit 0
fi
if ! python3 -c 'import setuptools, wheel, pip' 2>/dev/null; then
    skip "python on_bad" "pip, setuptools or wheel missing: python3 -m pip install setuptools wheel"
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

. "$DLK_TESTS/badlib.sh"
bad_dataset 320 520
ds=$T/ds

PYTHONPATH="$T/py:$DLK_TESTS/python" "${run_py[@]}" \
    "$DLK_TESTS/python/test_on_bad.py" "$ds" "$T/clean" "$KEY"
rc=$?
[ $rc = 0 ] || echo "not ok - tests/python/test_on_bad.py exited $rc"

if PYTHONPATH="$T/py" python3 -c 'import torch' 2>/dev/null; then
    PYTHONPATH="$T/py:$DLK_TESTS/python" "${run_py[@]}" \
        "$DLK_TESTS/python/test_torch_data.py" "$ds" "$T/clean" "$KEY"
    rc=$?
    [ $rc = 0 ] || echo "not ok - tests/python/test_torch_data.py exited $rc"
else
    # torch is no dependency of the suite (scripts/deps.sh installs none):
    # a GPU machine with torch runs these (python/README.md, "Testing")
    skip "dlk.torch.IterableDataset under DataLoader and mp.spawn" \
        "torch is not importable here"
fi
