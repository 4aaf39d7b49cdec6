#!/usr/bin/env bash
# parquet_rss.sh PY_TARGET [ROWS]: the peak RSS of python3 -m dlk.parquet
# over one generated Parquet file of ROWS (default 12000) 256x256 JPEGs
# (about 300 MB, row groups of 500, uncompressed), a dry run and a create
# resized to 32x32, with the dlk package installed in PY_TARGET (pip
# install --target) over this build's libdlk.so.
set -euo pipefail
py=$1 rows=${2:-12000}
build=$(cd "$(dirname "$0")/../.." && pwd)/build
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
python3 - "$w/big.parquet" "$rows" <<'PY'
import io, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from PIL import Image
rng = np.random.default_rng(1)
base = [rng.integers(0, 256, (256, 256, 3), dtype=np.uint8) for _ in range(16)]
n = int(sys.argv[2])
data = []
for i in range(n):
    b = io.BytesIO()
    Image.fromarray(np.roll(base[i % 16], i, axis=1)).save(b, "JPEG", quality=85)
    data.append(b.getvalue())
t = pa.table({"image": pa.array(data, pa.binary()),
              "caption": ["row %d" % i for i in range(n)]})
pq.write_table(t, sys.argv[1], row_group_size=500, compression="none")
PY
echo "# parquet_rss.sh: $rows rows, $(($(stat -c %s "$w/big.parquet") >> 20)) MiB," \
     "$(nproc) cores, pyarrow $(python3 -c 'import pyarrow; print(pyarrow.__version__)')"
for mode in dry-run create; do
    rm -rf "$w/ds"
    extra=()
    [ "$mode" = dry-run ] && extra=(--dry-run)
    /usr/bin/time -f "$mode: peak RSS %M KiB, %e s" env PYTHONPATH="$py" \
        LD_LIBRARY_PATH="$build" python3 -m dlk.parquet create "$w/ds" \
        "$w/big.parquet" --resize 32x32 --jobs 2 "${extra[@]}" 2>&1 >/dev/null |
        grep "peak RSS"
done
