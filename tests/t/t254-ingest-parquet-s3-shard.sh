#!/usr/bin/env bash
# Parquet tables (dlk.ingest_parquet, python3 -m dlk.parquet) from S3 and
# in shares: a prefix s3://bucket/tables/ or one s3://.../FILE.parquet as
# the source, read with the AWS settings the dlk command reads (moto
# here), keys s3://.../FILE.parquet/ROW versioned by the object's size and
# time, the same rows when the images are read again from S3 rather than
# held, a rerun ingesting nothing again and a rewritten object's rows
# reported as changed; a dataset on S3; --shard I/N and --shard auto
# splitting the rows, the last share merging them all, every row once.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
py_modules "ingest parquet from s3" pyarrow PIL boto3 || exit 0
py_binding "ingest parquet from s3" || exit 0

# FILE ROWS: a table of ROWS rows (an image and a caption each) at FILE
table() {
    python3 - "$@" <<'PY'
import io, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from PIL import Image
f, n = sys.argv[1], int(sys.argv[2])
def img(i):
    b = io.BytesIO()
    Image.new("RGB", (10 + i, 8 + i), (7 * i % 256, 60, 90)).save(b, "JPEG")
    return b.getvalue()
os.makedirs(os.path.dirname(f), exist_ok=True)
pq.write_table(pa.table({"image": pa.array([img(i) for i in range(n)], pa.binary()),
                         "caption": ["%s %d" % (os.path.basename(f), i) for i in range(n)]}),
               f, row_group_size=3)
PY
}
upload() { # DIR s3://bucket/prefix
    python3 - "$1" "$2" <<'PY'
import os, sys, boto3
src, url = sys.argv[1], sys.argv[2][5:]
bucket, _, prefix = url.partition("/")
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for root, _, files in os.walk(src):
    for f in files:
        p = os.path.join(root, f)
        s3.upload_file(p, bucket, prefix.rstrip("/") + "/" + os.path.relpath(p, src))
PY
}
# DATASET: {key: caption}
captions() {
    python3 - "$DLK" "$1" <<'PY'
import json, subprocess, sys
def col(t):
    out = subprocess.check_output([sys.argv[1], "cat", sys.argv[2], t, "0:", "--json"])
    return [bytes(json.loads(l)["values"]).decode() for l in out.splitlines()]
print(json.dumps(dict(zip(col("key"), col("caption")))))
PY
}

s3_start
s3_mkbucket raw
s3_mkbucket lake
S=$T/src
table "$S/a.parquet" 5
table "$S/sub/b.parquet" 4
echo notes > "$S/README.txt"
upload "$S" s3://raw/tables

ok "create from an S3 prefix" pq create "$T/ds" s3://raw/tables/ --json
check "9 rows, README not a sample" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==9 and d["skipped"]==0, d
assert d["unused_objects"]==[{"key": "README.txt", "reason": "not a sample: not a Parquet file"}], d["unused_objects"]' "$OUT"
check "keys are the objects' URLs and rows, with their captions" python3 -c '
import json,sys; got=json.loads(sys.argv[1])
exp={"s3://raw/tables/%s/%d.jpg" % (f, i): "%s %d" % (f.split("/")[-1], i)
     for f, n in (("a.parquet", 5), ("sub/b.parquet", 4)) for i in range(n)}
assert got==exp, (got, exp)' "$(captions "$T/ds")"
ok "create from S3, every image read again (--hold-mb 0)" pq create "$T/ds0" s3://raw/tables/ --hold-mb 0 --json
check "the same rows" diff <(dump "$T/ds") <(dump "$T/ds0")
ok "rerun: nothing new" pq ingest "$T/ds" s3://raw/tables --json
check "9 present, none ingested" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["present"]==9 and d["changed"]==0, d' "$OUT"
table "$S/a.parquet" 6
mkdir "$T/again" && cp "$S/a.parquet" "$T/again/"
upload "$T/again" s3://raw/tables
ok "rerun after an object was rewritten" pq ingest "$T/ds" s3://raw/tables/ --json
check "its old rows changed, its new row ingested" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["changed"]==5 and d["present"]==4 and d["ingested"]==1, d' "$OUT"

ok "one object, into a dataset on S3" pq create s3://lake/one s3://raw/tables/sub/b.parquet --json
check "its 4 rows" python3 -c '
import json,sys; got=json.loads(sys.argv[1])
assert sorted(got)==["s3://raw/tables/sub/b.parquet/%d.jpg" % i for i in range(4)], got' "$(captions s3://lake/one)"
fails "a missing object (exit 2)" 2 pq create "$T/none" s3://raw/nothing/here.parquet
check "names it" grep -q "s3://raw/nothing/here.parquet" "$ERR"

# shares: 0 of 2 by number, 1 of 2 from a Slurm array's environment
ok "share 0/2" pq create "$T/sh" "$S" --shard 0/2 --json
check "part of the rows, not merged" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert 0 < d["ingested"] < 10 and not d["complete"], d' "$OUT"
n0=$(json_field ingested)
ok "share 1/2 from SLURM_ARRAY_TASK_ID" env SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_MIN=3 \
    SLURM_ARRAY_TASK_COUNT=2 PYTHONPATH="$T/py" "${run_py[@]}" -m dlk.parquet create "$T/sh" "$S" --shard auto --json
check "the rest, merged" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] + int(sys.argv[2]) == 10 and d["complete"], d' "$OUT" "$n0"
check "every row once, as the unsharded run has them" python3 -c '
import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2])
strip=lambda d: {k.split("/src/")[-1]: v for k, v in d.items()}
assert len(a)==10 and strip(a)==strip(b), (a, b)' "$(captions "$T/sh")" "$(pq create "$T/whole" "$S" --json >/dev/null && captions "$T/whole")"
fails "--shard auto with no launcher's variables (exit 2)" 2 env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX \
    PYTHONPATH="$T/py" "${run_py[@]}" -m dlk.parquet create "$T/sh2" "$S" --shard auto
check "names them" grep -q "neither JOB_COMPLETION_INDEX .* nor SLURM_ARRAY_TASK_ID" "$ERR"
fails "--shard 2/2 (exit 2)" 2 pq create "$T/sh2" "$S" --shard 2/2
check "wrote nothing" test ! -e "$T/sh2"
