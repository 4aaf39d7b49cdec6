#!/usr/bin/env bash
# from-dir reads regular files only, the same way in every mode (.npy
# trees read as rows with keys, .npy trees read as before, media): a
# symbolic link (to a file inside the tree, outside it, or to a folder),
# a FIFO, a folder nested more than 16 levels deep and a path longer than
# a key may be are never read, and never dropped silently: each is
# counted as not ingested and reported with its path and why, on stderr
# and in --json.  A FIFO never blocks the command.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "from-dir links" "numpy missing: python3 -m pip install numpy"; exit 0; }

# make_tree DIR SUFFIX: three regular .npy files (values 0, 1, 2) and
# every kind of entry that is not one
make_tree() {
    python3 - "$1" "$2" "$T/outside" <<'PY'
import numpy as np, os, sys
d, suf, outside = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(d + "/sub")
os.makedirs(outside, exist_ok=True)
for i, p in enumerate(["a", "b", "sub/c"]):
    np.save("%s/%s%s.npy" % (d, p, suf), np.full(4, i, np.float32))
np.save("%s/secret%s.npy" % (outside, suf), np.full(4, 99, np.float32))
os.symlink("a%s.npy" % suf, "%s/in-link%s.npy" % (d, suf))
os.symlink("%s/secret%s.npy" % (outside, suf), "%s/out-link%s.npy" % (d, suf))
os.symlink(outside, d + "/dir-link")
os.mkfifo("%s/fifo%s.npy" % (d, suf))
deep = d + "/deep" + "".join("/l%d" % i for i in range(17))
os.makedirs(deep)
np.save("%s/x%s.npy" % (deep, suf), np.full(4, 7, np.float32))
lng = d + "/" + "/".join(["n" * 240] * 5)
os.makedirs(lng)
np.save("%s/y%s.npy" % (lng, suf), np.full(4, 8, np.float32))
PY
}
# check_report MODE: the --json summary of the previous command
check_report() {
    check "$1: 3 ingested, 6 not ingested, each with its path and why" python3 - "$OUT" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); suf = sys.argv[2]
assert d["ingested"] == 3 and d["unused"] == 6, (d["ingested"], d["unused"])
got = {o["key"]: o["reason"] for o in d["unused_objects"]}
deep = "deep/" + "/".join("l%d" % i for i in range(16))
want = {"in-link%s.npy" % suf: "symbolic link", "out-link%s.npy" % suf: "symbolic link",
        "dir-link": "symbolic link", "fifo%s.npy" % suf: "FIFO",
        deep: "nested more than 16 levels deep"}
for k, why in want.items():
    assert k in got and why in got[k], (k, got)
long = [k for k in got if k.startswith("nnnn")]
assert len(long) == 1 and "longer than 1024 bytes" in got[long[0]], got
PY
}
# values DATASET: the first value of every sample of x, sorted
values() {
    local n i
    n=$(dlk ls "$1" --json | python3 -c 'import json,sys; print([t for t in json.load(sys.stdin)["tensors"] if t["name"] == "x"][0]["samples"])')
    for ((i = 0; i < n; i++)); do
        dlk cat "$1" x "$i" --json | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["values"][0]))'
    done | sort -n | tr '\n' ' '
}

# .npy files named STEM.TENSOR.npy: rows with keys
make_tree "$T/rows" .x
ok "rows: create from-dir (a FIFO does not block it)" timeout 60 "$DLK" create "$T/ds-rows" from-dir "$T/rows" --tensor x:f32:4 --json
check_report rows .x
check "rows: only the three regular files, with their own values" test "$(values "$T/ds-rows")" = "0 1 2 "
ok "rows: without --json" timeout 60 "$DLK" create "$T/ds-rows2" from-dir "$T/rows" --tensor x:f32:4
check "rows: each named on stderr with why" sh -c 'grep -q "not ingested .in-link.x.npy.: not read: a symbolic link" "$1" && grep -q "not ingested .fifo.x.npy.: not read: a FIFO" "$1" && grep -q "not ingested .dir-link.: not read: a symbolic link" "$1"' _ "$ERR"
check "rows: the summary counts them" grep -q "; 6 objects not ingested" "$OUT"

# .npy files read as before (no key tensors): the same rules
make_tree "$T/plain" ""
ok "as before: create from-dir --no-key" timeout 60 "$DLK" create "$T/ds-plain" from-dir "$T/plain" --tensor x:f32:4 --no-key --json
check_report "as before" ""
check "as before: only the three regular files (no link followed)" test "$(values "$T/ds-plain")" = "0 1 2 "
ok "as before: without --json" timeout 60 "$DLK" create "$T/ds-plain2" from-dir "$T/plain" --tensor x:f32:4 --no-key
check "as before: each named on stderr" sh -c 'grep -q "not ingested .out-link.npy.: not read: a symbolic link" "$1" && grep -q "not ingested .deep/l0/.*: not read: a directory nested more than 16 levels deep" "$1"' _ "$ERR"
check "as before: the summary counts them" grep -q "; 6 objects not ingested" "$OUT"
ok "dry run: the reasons summed" timeout 60 "$DLK" ingest "$T/ds-rows" from-dir "$T/rows" --dry-run
check "dry run: 4 symbolic links or FIFO, by reason" sh -c 'grep -q "^not ingested: 3 not read: a symbolic link" "$1" && grep -q "^not ingested: 1 not read: a FIFO" "$1"' _ "$OUT"

# a --labels manifest named on the command line may be a link (resolved
# before it is read); a FIFO in its place is refused at once
mkdir -p "$T/lsrc" "$T/meta"
python3 -c '
import numpy as np, sys
for i, n in enumerate("abc"): np.save("%s/%s.x.npy" % (sys.argv[1], n), np.full(4, i, np.float32))' "$T/lsrc"
printf 'key,label\na,0\nb,1\nc,0\n' > "$T/meta/real.csv"
ln -s real.csv "$T/meta/labels.csv"
ok "--labels through a symbolic link" timeout 60 "$DLK" create "$T/ds-lab" from-dir "$T/lsrc" --labels "$T/meta/labels.csv" --tensor x:f32:4 --tensor labels:i32 --json
check "3 rows with their labels" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"] == 3, d' "$OUT"
mkfifo "$T/meta/fifo.csv"
fails "--labels naming a FIFO fails at once" 3 timeout 20 "$DLK" create "$T/ds-lab2" from-dir "$T/lsrc" --labels "$T/meta/fifo.csv" --tensor x:f32:4 --tensor labels:i32
check "naming it as a FIFO" grep -q "fifo.csv': it is a FIFO" "$ERR"
