#!/usr/bin/env bash
# tests/bench/parquet_memory.sh [ROWS...] - the memory of a Parquet ingest
# (dlk.ingest_parquet) as its table grows: for each ROWS (default 400 and
# 1200), a table of ROWS noise JPEGs of 900x900 (about 0.6 MB each, in row
# groups of 50, as the Hugging Face hub writes image tables in small row
# groups) is ingested to 32x32 three ways, and each run's peak RSS and
# seconds printed:
#   held:    --hold-mb 100000, every image held for the run (the binding's
#            only way before hold_mb);
#   default: --hold-mb 256;
#   read:    --hold-mb 0, every image read again from its table;
# beside `dlk create from-dir` over the same JPEGs as files (the floor:
# the library's own pipeline).  The three datasets of each size are
# checked to hold the same rows.
#   tests/bench/parquet_memory.sh                 (build/, the binding
#                                                   installed into a temp
#                                                   folder)
#   PY=/path/with/dlk tests/bench/parquet_memory.sh 400 1200 3600
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DLK=${DLK:-$root/build/dlk}
[ $# -gt 0 ] || set -- 400 1200
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-pqmem.XXXXXX")
trap 'rm -rf "$T"' EXIT
if [ -z "${PY:-}" ]; then
    PY=$T/py
    DLK_SOURCE_DIR=$root DLK_LIBDIR=$(dirname "$DLK") python3 -m pip install -q \
        --no-build-isolation --no-deps --no-cache-dir --target "$PY" "$root/python" >&2
fi
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo); $("$DLK" --version | head -n1); pyarrow $(python3 -c 'import pyarrow; print(pyarrow.__version__)')"

# CMD... -> "peak_MiB seconds" of its run
peak() {
    python3 -c 'import resource, subprocess, sys, time
t = time.monotonic()
r = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
s = time.monotonic() - t
print("%d %.2f" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, s))
sys.exit(r)' "$@"
}

printf '%8s %10s %12s %12s %12s %12s\n' rows table_MB from-dir held default read
for n in "$@"; do
    python3 - "$T/t$n" "$n" <<'PY'
import io, os, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from PIL import Image
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d + "/files")
rng = np.random.default_rng(n)
w = pq.ParquetWriter(d + "/t.parquet", pa.schema([("image", pa.binary()), ("label", pa.int64())]))
for s in range(0, n, 50):
    data = []
    for i in range(s, min(n, s + 50)):
        b = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (900, 900, 3), dtype=np.uint8)).save(b, "JPEG", quality=90)
        data.append(b.getvalue())
        open("%s/files/%d.jpg" % (d, i), "wb").write(data[-1])
    w.write_table(pa.table({"image": pa.array(data, pa.binary()),
                            "label": list(range(s, s + len(data)))}))
w.close()
PY
    mb=$(( $(stat -c %s "$T/t$n/t.parquet") / 1048576 ))
    f=$(peak "$DLK" create "$T/f$n" from-dir "$T/t$n/files" --resize 32x32 --no-metadata)
    h=$(peak env PYTHONPATH="$PY" python3 -m dlk.parquet create "$T/h$n" "$T/t$n/t.parquet" --resize 32x32 --hold-mb 100000)
    d=$(peak env PYTHONPATH="$PY" python3 -m dlk.parquet create "$T/d$n" "$T/t$n/t.parquet" --resize 32x32)
    r=$(peak env PYTHONPATH="$PY" python3 -m dlk.parquet create "$T/r$n" "$T/t$n/t.parquet" --resize 32x32 --hold-mb 0)
    for a in "$T/d$n" "$T/r$n"; do
        for t in images labels; do
            cmp -s <("$DLK" cat "$T/h$n" $t 0: --json) <("$DLK" cat "$a" $t 0: --json) ||
                { echo "differs: $a $t" >&2; exit 1; }
        done
    done
    printf '%8d %10d %12s %12s %12s %12s\n' "$n" "$mb" "${f% *}MB/${f#* }s" \
        "${h% *}MB/${h#* }s" "${d% *}MB/${d#* }s" "${r% *}MB/${r#* }s"
    rm -rf "$T/t$n" "$T/f$n" "$T/h$n" "$T/d$n" "$T/r$n"
done
echo "(peak RSS in MiB / seconds of each run; held, default and read hold the same rows)"
