#!/usr/bin/env bash
# Queries and views of an s3:// dataset (moto): the chunks are read, not
# mapped; a view is saved, listed, read, verified and streamed there.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
have_numpy || { skip "views on s3" "numpy missing: python3 -m pip install numpy"; exit 0; }
s3_start
s3_mkbucket dlk-t172
python3 "$DLK_TESTS/../examples/sample_data.py" "$T/a" --samples 30 --size 16 --jpeg >/dev/null
L=$T/local
ok "the same rows locally" dlk create "$L" from-dir "$T/a" --chunk-size 2K --quiet
DS=s3://dlk-t172/ds
ok "create on s3" dlk create "$DS" from-dir "$T/a" --chunk-size 2K --quiet
EXPR="labels == 'circle-red' or contains(key, '1') and mean(images) > 90"
ok "query the local dataset" dlk query "$L" "$EXPR" --json
cp "$OUT" "$T/local.json"
ok "query on s3, saving a view" dlk query "$DS" "$EXPR" --save-view v --json --threads 3
check "the rows of the local dataset" python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["rows"]; b=json.load(open(sys.argv[2]))["rows"]; assert a==b and a, (a,b)' "$OUT" "$T/local.json"
ok "the view's rows on s3" dlk query "$DS" --view v --json
check "are the rows saved" python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["rows"]; b=json.load(open(sys.argv[2]))["rows"]; assert a==b' "$OUT" "$T/local.json"
ok "ls lists it" dlk ls "$DS" --json
check "one view" python3 -c 'import json,sys; assert [v["name"] for v in json.load(open(sys.argv[1]))["views"]]==["v"]' "$OUT"
ok "verify --view on s3" dlk verify "$DS" --view v
ok "bench-stream --view on s3" dlk bench-stream "$DS" --view v --device cpu --batch-size 2 --order-out "$T/order" --json
check "streams exactly the view's rows" python3 -c 'import json,sys; got=sorted(int(x) for l in open(sys.argv[1]) for x in l.split()); assert got==json.load(open(sys.argv[2]))["rows"]' "$T/order" "$T/local.json"
ok "commit on s3" dlk commit "$DS" -m views
ok "the commit's view" dlk query "$DS" --view v --at main --count
