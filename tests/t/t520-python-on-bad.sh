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

py_binding "python on_bad" || exit 0

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
