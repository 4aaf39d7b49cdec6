#!/usr/bin/env bash
# A later batch that brings a class the dataset lacks appends it to the
# class list (new names in byte order after the old ones; no id of an old
# class changes), from folders and from a label manifest; --strict-classes
# refuses as before; --dry-run tells and writes nothing; two ingests that
# each add a class at once, into a directory and into S3 (moto), both end
# in the one list with every row's id naming its own class.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
if ! python3 -c 'import PIL' 2>/dev/null; then
    skip "ingest new classes" "needs Pillow: python3 -m pip install pillow"
    exit 0
fi
# DATASET: "class_names" of tensor labels, comma-joined
classes() {
    dlk ls "$1" --json | python3 -c '
import json, sys
t = {x["name"]: x for x in json.load(sys.stdin)["tensors"]}
print(",".join(t["labels"]["class_names"]))'
}
# DATASET: every row's label names its folder (key .../CLASS/NAME.jpg;
# the rows of the label manifest, in folder c, are checked on their own)
rows_match() {
    python3 - "$DLK" "$1" <<'PY'
import json, subprocess, sys
dlk, ds = sys.argv[1], sys.argv[2]
m = json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))
names = {x["name"]: x for x in m["tensors"]}["labels"]["class_names"]
def col(t):
    out = subprocess.check_output([dlk, "cat", ds, t, "0:", "--json"])
    return [json.loads(l)["values"] for l in out.splitlines()]
keys = ["".join(map(chr, k)) if isinstance(k, list) else k for k in col("key")]
labs = col("labels")
assert len(keys) == len(labs) and keys, (len(keys), len(labs))
for k, l in zip(keys, labs):
    l = l[0] if isinstance(l, list) else l
    if k.split("/")[-2] == "c":
        continue
    assert names[l] == k.split("/")[-2], (k, l, names[l])
print(len(keys))
PY
}

A=$T/a B=$T/b C=$T/c
small_jpegs "$A" dog/d1.jpg dog/d2.jpg cat/c1.jpg cat/c2.jpg bird/b1.jpg
ok "create from folders" dlk create "$T/ds" from-dir "$A" --json
check "classes bird,cat,dog" test "$(classes "$T/ds")" = bird,cat,dog
small_jpegs "$B" fish/f1.jpg fish/f2.jpg cat/c3.jpg ant/a1.jpg
ok "dry run of a batch with new classes" dlk ingest "$T/ds" from-dir "$B" --dry-run --json
check "tells ant 3, fish 4" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["classes_added"]==[{"tensor":"labels","name":"ant","id":3},{"tensor":"labels","name":"fish","id":4}], d["classes_added"]' "$OUT"
check "dry run wrote nothing" test "$(classes "$T/ds")" = bird,cat,dog
cp -r "$T/ds" "$T/ds-strict"
fails "--strict-classes refuses the new classes (exit 3)" 3 dlk ingest "$T/ds-strict" from-dir "$B" --strict-classes --max-skip 0.1
check "as before: the class is not one of the 3" grep -q "class 'fish' is not one of the 3 classes of tensor 'labels'" "$ERR"
check "strict: the list is unchanged" test "$(classes "$T/ds-strict")" = bird,cat,dog
ok "ingest the batch" dlk ingest "$T/ds" from-dir "$B"
check "tells what it added" grep -q "added class 'ant' (id 3) to tensor 'labels'" "$ERR"
check "appended in byte order, old ids kept" test "$(classes "$T/ds")" = bird,cat,dog,ant,fish
check "9 rows, each labelled with its folder" test "$(rows_match "$T/ds")" = 9
ok "verify" dlk verify "$T/ds"
ok "the same batch again: nothing new" dlk ingest "$T/ds" from-dir "$B" --json
check "no class added" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["classes_added"]==[] and d["ingested"]==0, d' "$OUT"
check "list unchanged" test "$(classes "$T/ds")" = bird,cat,dog,ant,fish

# a label manifest's new class; an integer label is an id, never a name
small_jpegs "$C" x1.jpg x2.jpg x3.jpg
printf 'key,label\nx1.jpg,cat\nx2.jpg,zebra\nx3.jpg,2\n' > "$T/m.csv"
ok "ingest with a manifest naming a new class" dlk ingest "$T/ds" from-dir "$C" --labels "$T/m.csv" --json
check "zebra appended as 5; '2' is the id of dog" test "$(classes "$T/ds")" = bird,cat,dog,ant,fish,zebra
ok "labels of the three rows" dlk cat "$T/ds" labels 9: --json
check "cat=1, zebra=5, dog=2 in some order" python3 -c '
import json,sys
v=sorted(json.loads(l)["values"] if not isinstance(json.loads(l)["values"],list) else json.loads(l)["values"][0] for l in open(sys.argv[1]))
assert v==[1,2,5], v' "$OUT"
printf 'key,label\nx4.jpg,99\n' > "$T/m2.csv"
small_jpegs "$T/d" x4.jpg
fails "an id out of range is still a bad row (exit 3)" 3 dlk ingest "$T/ds" from-dir "$T/d" --labels "$T/m2.csv"
check "names it" grep -q "class '99' is not one of the 6 classes" "$ERR"

# two ingests at once, each adding its own class: both end in one list
race() { # DATASET NAME1 NAME2 (source dirs $T/r-NAME)
    local ds=$1 x=$2 y=$3
    dlk ingest "$ds" from-dir "$T/r-$x" --quiet > "$T/$x.out" 2>&1 & local p1=$!
    dlk ingest "$ds" from-dir "$T/r-$y" --quiet > "$T/$y.out" 2>&1 & local p2=$!
    wait $p1; local r1=$?
    wait $p2; local r2=$?
    echo "$r1 $r2" >> "$T/race-codes"
    # a loser exits 4 with nothing published; run again, it is kept
    for n in "$x:$r1" "$y:$r2"; do
        case ${n#*:} in
        0) ;;
        4) dlk ingest "$ds" from-dir "$T/r-${n%%:*}" --quiet || return 1 ;;
        *) cat "$T/${n%%:*}.out"; return 1 ;;
        esac
    done
}
for pair in "gnu hen" "ibis jay" "kite lynx"; do
    set -- $pair
    small_jpegs "$T/r-$1" "$1/p1.jpg" "$1/p2.jpg" "$1/p3.jpg"
    small_jpegs "$T/r-$2" "$2/q1.jpg" "$2/q2.jpg"
done
for pair in "gnu hen" "ibis jay" "kite lynx"; do
    set -- $pair
    check "two ingests adding $1 and $2 at once" race "$T/ds" "$1" "$2"
done
check "the list holds all six, old ids first" python3 -c '
import sys; v=sys.argv[1].split(",")
assert v[:6]==["bird","cat","dog","ant","fish","zebra"], v
assert sorted(v[6:])==["gnu","hen","ibis","jay","kite","lynx"], v' "$(classes "$T/ds")"
check "every row labelled with its folder" rows_match "$T/ds"
ok "verify after the races" dlk verify "$T/ds"

# S3: the head's compare-and-swap is the store's conditional PUT
s3_start --atomic
s3_mkbucket lake
ok "create on S3" dlk create s3://lake/ds from-dir "$A" --quiet
for pair in "gnu hen" "ibis jay"; do
    set -- $pair
    check "S3: two ingests adding $1 and $2 at once" race s3://lake/ds "$1" "$2"
done
check "S3: the list holds the new four after the old three" python3 -c '
import sys; v=sys.argv[1].split(",")
assert v[:3]==["bird","cat","dog"] and sorted(v[3:])==["gnu","hen","ibis","jay"], v' "$(classes s3://lake/ds)"
check "S3: every row labelled with its folder" rows_match s3://lake/ds
ok "S3: verify" dlk verify s3://lake/ds
echo "# race exit codes: $(tr "\n" " " < "$T/race-codes")"
