#!/usr/bin/env bash
# Parquet tables larger than what is held (dlk.ingest_parquet's hold_mb,
# --hold-mb): past it a row's image is listed by its size and read again
# from its table when the library asks for it (read_object), by a reader
# that moves front to back through the table's batches.  The rows are
# those of the same tables held whole, in either order; a table's rows
# keep row number order ("t/2" before "t/10"), two tables' rows taking
# turns in the shuffled order and each table whole in the sorted one; a
# rerun reads nothing again; Ctrl-C and the same command resume; a reader
# that fails or returns other bytes than were listed stops the run naming
# the object.
. "$DLK_TESTS/lib.sh"
py_modules "ingest parquet streamed" pyarrow PIL numpy || exit 0
py_binding "ingest parquet streamed" || exit 0

# FILE ROWS GROUP [plain]: ROWS rows of noise images of their own sizes,
# a caption and a label, in row groups of GROUP rows; the images a
# Hugging Face Image struct, or with plain a binary column
table() {
    python3 - "$@" <<'PY'
import io, os, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from PIL import Image
f, n, g = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(n)
def img(i):
    b = io.BytesIO()
    a = rng.integers(0, 256, (12 + i % 9, 10 + i % 7, 3), dtype=np.uint8)
    Image.fromarray(a).save(b, "JPEG", quality=90)
    return b.getvalue()
data = [img(i) for i in range(n)]
if len(sys.argv) > 4:
    col = pa.array(data, pa.binary())
else:
    col = pa.array([{"bytes": d, "path": None} for d in data],
                   pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
os.makedirs(os.path.dirname(f), exist_ok=True)
pq.write_table(pa.table({"image": col,
                         "caption": ["%s %d" % (os.path.basename(f), i) for i in range(n)],
                         "label": [["a", "b", "c"][i % 3] for i in range(n)]}),
               f, row_group_size=g)
PY
}
# DATASET: its rows' keys in dataset order, "TABLE/ROW" a line
keys() {
    "$DLK" cat "$1" key 0: --json | python3 -c '
import json, sys
for l in sys.stdin:
    k = bytes(json.loads(l)["values"]).decode().split("/src/")[-1].split("/big/")[-1]
    print(k.rsplit(".", 1)[0])'
}

S=$T/src
table "$S/a.parquet" 700 100
table "$S/sub/b.parquet" 450 1000 plain

ok "create, every image held" pq create "$T/held" "$S" --resize 8x8 --json
check "1150 rows" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==1150 and d["skipped"]==0, d' "$OUT"
ok "create, every image read again (--hold-mb 0)" pq create "$T/read" "$S" --resize 8x8 --hold-mb 0 --json
check "1150 rows" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==1150 and d["skipped"]==0, d' "$OUT"
check "every tensor of every row as held" diff <(dump "$T/held") <(dump "$T/read")
keys "$T/read" > "$T/read.keys"
check "each table's rows by row number, the two taking turns" python3 - "$T/read.keys" <<'PY'
import sys
ks = open(sys.argv[1]).read().split()
assert len(ks) == 1150 and len(set(ks)) == 1150, len(ks)
for t, n in (("a.parquet", 700), ("sub/b.parquet", 450)):
    rows = [int(k.rsplit("/", 1)[1]) for k in ks if k.rsplit("/", 1)[0] == t]
    assert rows == list(range(n)), (t, rows[:20])
first = {k.rsplit("/", 1)[0] for k in ks[:4]}
assert first == {"a.parquet", "sub/b.parquet"}, ks[:4]
PY

ok "read again, every row group streamed by pages as a large one is" \
    env PYTHONPATH="$T/py" "${run_py[@]}" -c 'import sys
import dlk, dlk.parquet as P
P._GROUP_WHOLE = 0
r = dlk.ingest_parquet(sys.argv[1], sys.argv[2], create=True, resize=(8, 8), hold_mb=0)
assert r["ingested"] == 1150, r' "$T/paged" "$S"
check "every tensor of every row as held" diff <(dump "$T/held") <(dump "$T/paged")

ok "sorted, read again" pq create "$T/sorted" "$S" --resize 8x8 --hold-mb 0 --order sorted --json
check "each table whole, by row number" python3 - "$(keys "$T/sorted")" <<'PY'
import sys
exp = ["a.parquet/%d" % i for i in range(700)] + ["sub/b.parquet/%d" % i for i in range(450)]
assert sys.argv[1].split() == exp, sys.argv[1].split()[:20]
PY
ok "sorted, held" pq create "$T/sorted-held" "$S" --resize 8x8 --order sorted --json
check "the same rows in the same order" diff <(dump "$T/sorted") <(dump "$T/sorted-held")

ok "rerun, read again" pq ingest "$T/read" "$S" --resize 8x8 --hold-mb 0 --json
check "nothing new" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["present"]==1150 and d["new"]==0, d' "$OUT"
table "$S/c.parquet" 30 7
ok "a table added" pq ingest "$T/read" "$S" --resize 8x8 --hold-mb 0 --json
check "its 30 rows only" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==30 and d["present"]==1150, d' "$OUT"

fails "--hold-mb -1 (exit 2)" 2 pq create "$T/bad" "$S" --hold-mb -1
check "says what it must be" grep -q "hold_mb must be a number of MiB" "$ERR"

# Ctrl-C while the rows are read again: the rows appended are kept and
# the same command continues; resized up, so that the run writes several
# chunks and is stopped after its first
table "$T/big/b.parquet" 3000 64 plain
interrupted() { # ORDER
    local ds=$T/big-$1.ds
    pq_interrupted "$1: Ctrl-C mid-run (exit 130)" "$ds" create "$ds" "$T/big" \
        --jobs 1 --hold-mb 0 --resize 128x128 --order "$1"
    check "$1: says how to continue" grep -q "run the same command to continue" "$ERR"
    ok "$1: the same command again" pq create "$ds" "$T/big" --jobs 1 --hold-mb 0 \
        --resize 128x128 --order "$1" --json
    check "$1: it resumed, every row once" python3 - "$OUT" "$(keys "$ds")" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ks = sys.argv[2].split()
assert d["resumed"] > 0 and d["resumed"] + d["ingested"] == 3000, d
assert sorted(ks) == sorted("b.parquet/%d" % i for i in range(3000)), len(ks)
if sys.argv[3] == "sorted":
    assert ks == ["b.parquet/%d" % i for i in range(3000)], ks[:20]
PY
}
interrupted shuffled
interrupted sorted

# the library's reader contract, through the binding: a reader that
# raises, or returns other bytes than its listing gave, stops the run
# naming the object; with a good reader the same ingest then takes every
# row once
check "a failing reader stops the run naming the object" \
    env PYTHONPATH="$T/py" "${run_py[@]}" - "$T" <<'PY'
import io, sys
import numpy as np
from PIL import Image
from dlk import _core
t = sys.argv[1]
rng = np.random.default_rng(3)
imgs = []
for i in range(300):
    b = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(b, "JPEG")
    imgs.append(b.getvalue())
objs = tuple(("t.parquet/%d.jpg" % i, "v1", None, len(b)) for i, b in enumerate(imgs))
def run(reader, n, create=False):
    try:
        return _core._ingest(t + "/r", t + "/nowhere", objs[:n], create, 0, 0, 0,
                             0, 0.0, False, 1, True, 0, False, False, False,
                             False, 0, 1, reader, True)
    except _core.Error as e:
        return e
good = lambda i: imgs[i]
assert run(good, 20, True)["ingested"] == 20
def boom(i):
    if i == 250:
        raise ValueError("the table went away")
    return imgs[i]
e = run(boom, 300)
assert isinstance(e, _core.Error), e
assert "object 't.parquet/250.jpg' was not read: ValueError: the table went away" in str(e), str(e)
e = run(lambda i: imgs[i][:3] if i == 100 else imgs[i], 300)
assert isinstance(e, _core.Error), e
assert "object 't.parquet/100.jpg' was not read: 3 bytes, where its listing had %d" % len(imgs[100]) in str(e), str(e)
r = run(good, 300)
assert r["present"] + r["resumed"] + r["ingested"] == 300 and r["skipped"] == 0, r
try:
    _core._ingest(t + "/r3", t + "/nowhere", objs, True)
    raise AssertionError("objects without bytes and no reader were taken")
except TypeError as e:
    assert "not a tuple (key, version, bytes)" in str(e), str(e)
PY

# a table rewritten between the listing and the read, its images of the
# same sizes but other bytes: the read fails its CRC-32, the run stops
# naming the row, no row of other bytes is ingested
table "$T/chg/t.parquet" 40 10 plain
check "a table changed since it was listed stops the run" \
    env PYTHONPATH="$T/py" "${run_py[@]}" - "$T" <<'PY'
import sys
import pyarrow as pa, pyarrow.parquet as pq
import dlk, dlk.parquet as P
t = sys.argv[1]
real = P._core._ingest
class Core:
    Error = P._core.Error
    @staticmethod
    def _ingest(*a):
        f = t + "/chg/t.parquet"
        tab = pq.read_table(f)
        imgs = [bytes(b[:-3]) + b"\x00\x00\x00" for b in tab.column("image").to_pylist()]
        pq.write_table(tab.set_column(0, "image", pa.array(imgs, pa.binary())), f,
                       row_group_size=10)
        return real(*a)
P._core = Core
try:
    dlk.ingest_parquet(t + "/chg.ds", t + "/chg", create=True, hold_mb=0)
    raise AssertionError("ingested a table rewritten since its listing")
except dlk.Error as e:
    assert "its table changed since it was listed" in str(e), str(e)
    assert "t.parquet/" in str(e), str(e)
PY
