# tests/mixlib.sh - a class-folder tree and bench-stream's label-mix
# figures, for the tests of the rows' order and the loader's shuffle.
#
#   . "$DLK_TESTS/mixlib.sh"
#   mix_need               skip the whole script (exit 0) without Pillow
#                          and numpy
#   mix_tree DIR C N SEED [SIZE]
#                          C folders class00.. of N SIZExSIZE JPEGs each
#                          (default 8; tests/bench/label_mix.sh: 32)
#   mix JSON               "worst epoch-1 epoch-2 ..." of a bench-stream
#                          --json report's label_mix
#   below LIMIT VALUES...  every value above 0 and at most LIMIT

mix_need() {
    if ! python3 -c 'import PIL, numpy' 2>/dev/null; then
        skip "$1" "needs Pillow and numpy: python3 -m pip install pillow numpy"
        exit 0
    fi
}

mix_tree() {
    python3 - "$@" <<'PY'
import os, sys
import numpy as np
from PIL import Image
base, c, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
size = int(sys.argv[5]) if len(sys.argv) > 5 else 8
rng = np.random.default_rng(seed)
for k in range(c):
    d = os.path.join(base, "class%02d" % k)
    os.makedirs(d)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(
            os.path.join(d, "%04d.jpg" % i), quality=90)
PY
}

mix() {
    python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["label_mix"]
print(m["ratio"], *m["per_epoch"])' "$1"
}

below() {
    local lim=$1 v; shift
    for v in "$@"; do
        python3 -c 'import sys; v, l = map(float, sys.argv[1:]); sys.exit(not 0 < v <= l)' "$v" "$lim" || return 1
    done
}
