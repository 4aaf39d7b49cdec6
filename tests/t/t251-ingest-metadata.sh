#!/usr/bin/env bash
# Hugging Face ImageFolder metadata: a metadata.jsonl or metadata.csv in
# the source (at its root, or one per split folder) names the files that
# are rows (file_name, relative to the metadata file's folder) and gives
# them columns: strings a text tensor, integers i64, other numbers f32, a
# "label" column of names a class_label tensor.  Files no metadata names
# are strays; a file named that the source lacks is a skipped row counted
# by --max-skip; --dry-run and --json tell all of it; a rerun ingests only
# what the metadata gained; from a directory and from S3 (moto) alike.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
if ! python3 -c 'import PIL' 2>/dev/null; then
    skip "ingest metadata" "needs Pillow: python3 -m pip install pillow"
    exit 0
fi
# DATASET TENSOR...: one JSON object {key: [values of each tensor]} of
# every row, keyed by the row's key below its source (after the last
# "/src/" or bucket prefix), text tensors as strings
S=$T/src
small_jpegs "$S" a.jpg b.jpg c.jpg d.jpg e.jpg f.jpg g.jpg h.jpg i.jpg j.jpg img/k.jpg stray.jpg
python3 - "$S" <<'PY'
import json, sys
rows = [{"file_name": n + ".jpg", "caption": "photo " + n, "score": 0.25 * i,
         "count": i, "label": ["cat", "dog", "bird"][i % 3]}
        for i, n in enumerate("abcdefghij")]
rows.append({"file_name": "img/k.jpg", "caption": "in a folder, \"quoted\"",
             "score": 1.5, "count": 10, "label": "cat"})
rows.append({"file_name": "gone.jpg", "caption": "missing", "score": 0,
             "count": 11, "label": "cat"})
with open(sys.argv[1] + "/metadata.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY

ok "dry run" dlk create "$T/ds" from-dir "$S" --dry-run --json
check "11 rows planned, the missing file skipped, the stray and the metadata not ingested" python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dry_run"] and d["planned"] == 11 and d["skipped"] == 1, d
assert d["errors"] == [{"key": "gone.jpg", "reason": "no such object: a metadata file names it, the source lacks it"}], d["errors"]
u = {o["key"]: o["reason"] for o in d["unused_objects"]}
assert u == {"metadata.jsonl": "not a sample: a metadata file",
             "stray.jpg": "not a sample: no metadata file names it"}, u
s = {t["name"]: (t["dtype"], t["shape"], t["kind"], t["classes"]) for t in d["schema"]}
assert s["caption"] == ("u8", [None], "text", []), s
assert s["score"] == ("f32", [], "generic", []), s
assert s["count"] == ("i64", [], "generic", []), s
assert s["labels"] == ("i32", [], "class_label", ["bird", "cat", "dog"]), s
assert "file_name" not in s, s
PY
check "wrote nothing" test ! -e "$T/ds"
ok "create from a directory with metadata.jsonl" dlk create "$T/ds" from-dir "$S" --json
check "11 rows, 1 skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==11 and d["skipped"]==1, d' "$OUT"
check "each row has its own metadata" python3 - "$(ds_rows "$T/ds" caption score count labels)" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert sorted(r) == sorted([n + ".jpg" for n in "abcdefghij"] + ["img/k.jpg"]), sorted(r)
assert r["c.jpg"] == ["photo c", 0.5, 2, "bird"], r["c.jpg"]
assert r["j.jpg"] == ["photo j", 2.25, 9, "cat"], r["j.jpg"]
assert r["img/k.jpg"] == ["in a folder, \"quoted\"", 1.5, 10, "cat"], r["img/k.jpg"]
PY
ok "verify" dlk verify "$T/ds"

# a rerun ingests what the metadata gained, only
small_jpegs "$S" l.jpg
printf '{"file_name": "l.jpg", "caption": "late", "score": 3, "count": 12, "label": "emu"}\n' >> "$S/metadata.jsonl"
ok "rerun after a row was added" dlk ingest "$T/ds" from-dir "$S" --json
check "1 new row, 11 present, class emu appended" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==1 and d["new"]==1 and d["present"]==11 and d["skipped"]==1, d
assert [c["name"] for c in d["classes_added"]]==["emu"], d' "$OUT"
check "its values" python3 -c '
import json,sys; r=json.loads(sys.argv[1]); assert r["l.jpg"]==["late",12,"emu"], r["l.jpg"]' "$(ds_rows "$T/ds" caption count labels)"

# max-skip counts the files named and missing (with the rows held)
small_jpegs "$S" p.jpg
for n in m n o p; do printf '{"file_name": "%s.jpg", "caption": "", "score": 0, "count": 0, "label": "cat"}\n' $n >> "$S/metadata.jsonl"; done
fails "4 missing of 17: over --max-skip (exit 3)" 3 dlk ingest "$T/ds" from-dir "$S"
check "names the reason" grep -q "4 x no such object: a metadata file names it, the source lacks it" "$ERR"
ok "--max-skip 0.5 lets it pass" dlk ingest "$T/ds" from-dir "$S" --max-skip 0.5
ok "--no-metadata: every image a row, no columns" dlk create "$T/plain" from-dir "$S" --no-metadata --json
check "14 images, no caption tensor" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); names=[t["name"] for t in d["schema"]]
assert d["ingested"]==14 and "caption" not in names, (d["ingested"], names)' "$OUT"

# per split folder, CSV: file_name anywhere, RFC 4180 quoting
P=$T/splits
small_jpegs "$P" train/x1.jpg train/x2.jpg test/y1.jpg train/sub/x3.jpg
printf 'caption,file_name,label\r\n"a, b",x1.jpg,cat\r\n"say ""hi""",x2.jpg,dog\r\n"two\nlines",sub/x3.jpg,cat\r\n' > "$P/train/metadata.csv"
printf 'file_name,caption,label\ny1.jpg,plain,dog\n' > "$P/test/metadata.csv"
ok "create from per-split metadata.csv" dlk create "$T/sp" from-dir "$P" --json
check "4 rows" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==4 and d["skipped"]==0, d' "$OUT"
check "quoted cells, keys relative to each file's folder" python3 - "$(ds_rows "$T/sp" caption labels)" <<'PY'
import json, sys
r = {k.split("/splits/")[-1]: v for k, v in json.loads(sys.argv[1]).items()}
assert r == {"train/x1.jpg": ["a, b", "cat"], "train/x2.jpg": ["say \"hi\"", "dog"],
             "train/sub/x3.jpg": ["two\nlines", "cat"], "test/y1.jpg": ["plain", "dog"]}, r
PY

# bad metadata: named errors, nothing written
B=$T/bad
small_jpegs "$B" p.jpg
printf '{"file_name": "p.jpg"}\n{"caption": "no name"}\n' > "$B/metadata.jsonl"
fails "a line without file_name (exit 3)" 3 dlk create "$T/b1" from-dir "$B"
check "names the file and line" grep -q "metadata file 'metadata.jsonl': line 2 is not a JSON object with a string \"file_name\"" "$ERR"
printf 'file_name,caption\np.jpg,x\np.jpg,y\n' > "$B/metadata.csv"; rm "$B/metadata.jsonl"
fails "a file named twice (exit 3)" 3 dlk create "$T/b2" from-dir "$B"
check "names it" grep -q "file_name 'p.jpg' appears twice" "$ERR"
printf 'caption\nx\n' > "$B/metadata.csv"
fails "no file_name column (exit 3)" 3 dlk create "$T/b3" from-dir "$B"
check "says so" grep -q "metadata file 'metadata.csv' has no column 'file_name'" "$ERR"
printf 'file_name,caption\np.jpg,x\n' > "$B/metadata.csv"; printf '{"file_name": "p.jpg"}\n' > "$B/metadata.jsonl"
fails "two metadata files in one folder (exit 3)" 3 dlk create "$T/b4" from-dir "$B"
check "names both" grep -q "two metadata files in one folder, 'metadata.csv' and 'metadata.jsonl'" "$ERR"

# S3: the same tree gives the same rows
s3_start
s3_mkbucket raw
s3_mkbucket lake
grep -v '"[mno].jpg"' "$S/metadata.jsonl" > "$T/m" && mv "$T/m" "$S/metadata.jsonl"
ok "create from-dir again (13 rows named and there)" dlk create "$T/dir2" from-dir "$S" --json
s3_put_tree "$S" s3://raw/src
ok "create from-s3 with metadata.jsonl" dlk create s3://lake/ds from-s3 s3://raw/src --json
check "13 rows, gone.jpg skipped, the stray not ingested" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==13 and d["skipped"]==1, d
assert {o["key"] for o in d["unused_objects"]}=={"metadata.jsonl","stray.jpg"}, d["unused_objects"]' "$OUT"
check "from-s3 equals from-dir row by row" test "$(ds_rows s3://lake/ds caption score count labels | sed 's|s3://raw/||g')" = "$(ds_rows "$T/dir2" caption score count labels)"
ok "S3: verify" dlk verify s3://lake/ds
