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
py_binding "python mixing loader" || exit 0

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
