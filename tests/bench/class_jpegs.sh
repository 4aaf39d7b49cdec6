# tests/bench/class_jpegs.sh - sourced by train_compare.sh and
# train_recipe.sh, whose arguments WORKDIR [N] it reads: DIST (required),
# W, N (default 20000), EPOCHS (default 3) and WORKERS (default the
# cores); prints the GPU and the cores, and makes N JPEGs of 500x375 q90
# (make_images.py) dealt round-robin into 10 class folders W/train/classC
# unless W/train is there from an earlier run.
#   here=$(cd "$(dirname "$0")" && pwd); . "$here/class_jpegs.sh"
root=$(cd "$here/../.." && pwd)
DIST=${DIST:?DIST must name the dist folder}
W=${1:?work dir}; N=${2:-20000}
EPOCHS=${EPOCHS:-3}; WORKERS=${WORKERS:-$(nproc)}
mkdir -p "$W"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null; echo "cores $(nproc)"
if [ ! -d "$W/train" ]; then
    python3 "$here/make_images.py" "$W/img" --n "$N" --jpeg-only >/dev/null
    for c in 0 1 2 3 4 5 6 7 8 9; do mkdir -p "$W/train/class$c"; done
    i=0
    for f in "$W/img/jpeg"/*.jpg; do
        mv "$f" "$W/train/class$((i % 10))/"
        i=$((i + 1))
    done
fi
