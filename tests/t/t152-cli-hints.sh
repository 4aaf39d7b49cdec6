#!/usr/bin/env bash
# Mistakes a new user makes, and what dlk says: the nearest command or
# flag to a typo, the tensors of a dataset for an unknown tensor name,
# malformed s3: URLs refused as usage errors (never a local directory
# named "s3:"), create on an existing dataset refused (--exist-ok to use
# it), and create -j N.
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "cli hints" "ffmpeg missing"; exit 0; }

S=$T/src
mkdir -p "$S/cat" "$S/dog"
ff -f lavfi -i "testsrc2=s=64x48:r=25" -frames:v 3 -q:v 4 "$S/cat/c%04d.jpg"
ff -f lavfi -i "testsrc2=s=64x48:r=25" -frames:v 3 -q:v 4 "$S/dog/d%04d.jpg"
DS=$T/ds

# suggestions
fails "unknown command" 2 dlk injest "$DS"
check "suggests ingest" grep -q "'injest' is not a dlk command; did you mean 'ingest'?" "$ERR"
fails "dlk help of a misspelt command" 2 dlk help verfy
check "suggests verify" grep -q "did you mean 'verify'?" "$ERR"
fails "no suggestion for a word far from any" 2 dlk zzzzzzzz
check "no guess" sh -c '! grep -q "did you mean" "$1"' sh "$ERR"
fails "ingest --resise" 2 dlk ingest "$DS" from-dir "$S" --resise 64x48
check "suggests --resize" grep -q "unknown option '--resise'; did you mean '--resize'?" "$ERR"
fails "create --tensr" 2 dlk create "$DS" --tensr x:u8
check "suggests --tensor" grep -q "did you mean '--tensor'?" "$ERR"
fails "ls --jsno" 2 dlk ls "$DS" --jsno
check "suggests --json" grep -q "did you mean '--json'?" "$ERR"
fails "verify --deeep" 2 dlk verify "$DS" --deeep
check "suggests --deep" grep -q "did you mean '--deep'?" "$ERR"
fails "bench-stream --shuffel" 2 dlk bench-stream "$DS" --shuffel
check "suggests --shuffle" grep -q "did you mean '--shuffle'?" "$ERR"
fails "ingest --max-skip=0.5x" 2 dlk ingest "$DS" from-dir "$S" --max-skip=0.5x
check "names the bad value" grep -q -- "--max-skip: '0.5x' is not a number" "$ERR"
fails "ingest --max-skip with no value" 2 dlk ingest "$DS" from-dir "$S" --max-skip
check "says it needs a value" grep -q "option '--max-skip' needs a value" "$ERR"
fails "a misspelt source kind" 2 dlk ingest "$DS" from-dri "$S"
check "suggests from-dir" grep -q "did you mean 'from-dir'?" "$ERR"

# create -j N, as --help says
ok "create -j 1 from-dir" dlk create "$DS" from-dir "$S" -j 1 --resize 32x24 --json
check "-j 1 used one decode thread" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["jobs"]==1 and d["ingested"]==6, d' "$OUT"
ok "create --jobs 2" dlk create "$T/ds2" from-dir "$S" --jobs 2 --resize 32x24 --json
check "--jobs 2 used two" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["jobs"]==2, d' "$OUT"

# an unknown tensor lists the dataset's tensors
fails "cat of an unknown tensor" 3 dlk cat "$DS" image 0
check "cat lists the tensors" grep -q "no tensor 'image' in '$DS' (its tensors: images, labels, key, key_version)" "$ERR"
fails "bench-stream --tensors with an unknown one" 3 dlk bench-stream "$DS" --device cpu --tensors images,label
check "bench-stream lists the tensors" grep -q "no tensor 'label' in '$DS' (its tensors: images, labels, key, key_version)" "$ERR"

# create on an existing dataset
samples() { "$DLK" ls "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tensors"][0]["samples"])'; }
fails "create from-dir again: exit 2" 2 dlk create "$DS" from-dir "$S" -j 1 --resize 32x24
check "names the dataset and --exist-ok" grep -q "a dataset already exists at '$DS'.*--exist-ok" "$ERR"
check "nothing appended" test "$(samples "$DS")" = 6
mkdir -p "$T/more/cat"
ff -f lavfi -i "testsrc2=s=64x48:r=25" -frames:v 2 -q:v 4 "$T/more/cat/m%04d.jpg"
fails "create from another source: exit 2" 2 dlk create "$DS" from-dir "$T/more" --resize 32x24
check "still nothing appended" test "$(samples "$DS")" = 6
ok "--exist-ok ingests into it" dlk create "$DS" from-dir "$T/more" --resize 32x24 --exist-ok --json
check "2 rows appended" test "$(samples "$DS")" = 8
fails "create with other tensors: exit 2" 2 dlk create "$DS" --tensor x:u8 --exist-ok
check "says the tensors differ" grep -q "already exists at '$DS' with other tensors" "$ERR"
ok "create --tensor on an empty dataset again with --exist-ok" dlk create "$T/e" --tensor x:u8
ok "... is a no-op with --exist-ok" dlk create "$T/e" --tensor x:u8 --exist-ok --json
check "created false" grep -q '"created": false' "$OUT"
fails "... and refused without" 2 dlk create "$T/e" --tensor x:u8
fails "create over a directory that is not a dataset: exit 3" 3 dlk create "$S" --tensor x:u8

# malformed s3: URLs are usage errors everywhere, never a local path
cd "$T" || exit 1
for u in s3:/x s3:// s3:///x s3:x; do
    fails "create $u" 2 dlk create "$u" --tensor x:u8
    check "create $u: says what an S3 url is" grep -q "bad url '$u': an S3 url is s3://BUCKET/PREFIX" "$ERR"
    fails "create $u from-dir" 2 dlk create "$u" from-dir "$S"
    fails "ingest into $u" 2 dlk ingest "$u" from-dir "$S"
    fails "ingest from-s3 $u" 2 dlk ingest "$DS" from-s3 "$u"
    fails "ingest from-dir $u" 2 dlk ingest "$DS" from-dir "$u"
    fails "ingest --labels $u" 2 dlk ingest "$DS" from-dir "$S" --labels "$u"
    for c in ls log verify gc; do
        fails "$c $u" 2 dlk "$c" "$u"
    done
    fails "cat $u" 2 dlk cat "$u" images 0
    fails "commit $u" 2 dlk commit "$u" -m x
    fails "bench-stream $u" 2 dlk bench-stream "$u" --device cpu
done
check "no local directory named s3: was made" test ! -e "$T/s3:"
