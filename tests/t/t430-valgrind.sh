#!/usr/bin/env bash
# t430-valgrind.sh - the end-to-end CLI flows under valgrind's memcheck:
# create, ingest from-dir of .npy files and of JPEGs, ls, cat in every
# mode, verify --deep and --all, commit, log, gc and bench-stream --device
# cpu (shuffled, several workers, two epochs), on a local dataset and on
# an s3:// one (moto).  Every command must exit as it does natively, with
# no memcheck error and no definite leak.  Small datasets keep it short.
#
# Needs the normal build (build/dlk): valgrind cannot run a sanitizer
# build.  DLK_VALGRIND_S3=0 leaves the S3 part out.
. "$DLK_TESTS/lib.sh"

if ! command -v valgrind >/dev/null 2>&1; then
    skip "valgrind" "valgrind is not installed: apt-get install -y valgrind"
    exit 0
fi
case "${SAN:-}" in
?*) skip "valgrind" "a sanitizer build (SAN=$SAN) cannot run under valgrind; run with the normal build (make test)"
    exit 0 ;;
esac
if nm "$DLK" 2>/dev/null | grep -q '__asan_init\|__tsan_init'; then
    skip "valgrind" "$DLK is a sanitizer build; valgrind needs the normal build (make; DLK=build/dlk)"
    exit 0
fi
have_numpy || { skip "valgrind" "numpy missing: python3 -m pip install numpy"; exit 0; }
command -v ffmpeg >/dev/null || { skip "valgrind" "ffmpeg missing: apt-get install -y ffmpeg"; exit 0; }

# a private copy: a rebuild of build/dlk during the run must not change it
cp "$DLK" "$T/dlk" && DLK=$T/dlk

# vg NAME WANT_RC ARGS...: dlk ARGS under memcheck, which must report
# nothing (its exit 99 is kept apart from dlk's own statuses).
VGLOG=$T/vg
mkdir -p "$VGLOG"
nvg=0
vg() {
    local name=$1 want=$2; shift 2
    nvg=$((nvg + 1))
    local log=$VGLOG/$nvg.log
    valgrind --quiet --error-exitcode=99 --leak-check=full \
        --errors-for-leak-kinds=definite --show-leak-kinds=definite \
        --num-callers=30 --log-file="$log" "$DLK" "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    if [ $rc -eq 99 ] || grep -q '^==[0-9]*== [A-Z]' "$log"; then
        echo "not ok - $name: valgrind found errors (exit $rc)"
        sed 's/^/#   /' "$log" | head -n 60
        return 1
    fi
    _report "$name (valgrind clean)" $rc "$want"
}

# sources: .npy files and a tree of JPEGs
NPY=$T/npy
python3 "$DLK_TESTS/../examples/sample_data.py" "$NPY" --samples 24 --size 16 >/dev/null
JPG=$T/jpg
for c in cat dog; do
    mkdir -p "$JPG/$c"
    ffmpeg -nostdin -hide_banner -loglevel error -f lavfi \
        -i "testsrc2=s=160x120" -frames:v 8 -q:v 3 "$JPG/$c/f%02d.jpg"
done
printf 'not an image' > "$JPG/cat/broken.jpg"

D=$T/npyds
vg "create with tensors" 0 create "$D" --tensor images:u8:16x16x3 \
    --tensor labels:i32 --tensor 'boxes:f32:?x4:zstd' \
    --classes labels=red,green,blue --chunk-size 4K
# --no-key: the .npy reader that appends what it is given (a keyed
# rerun would skip every row it holds)
vg "ingest from-dir of .npy" 0 ingest "$D" from-dir "$NPY" --no-key --json
check "24 rows ingested" grep -q '"ingested": 24' "$OUT"
vg "commit" 0 commit "$D" -m first
vg "ingest again (append)" 0 ingest "$D" from-dir "$NPY" --no-key --quiet --no-resume
vg "commit again" 0 commit "$D" -m second --json
vg "ls" 0 ls "$D"
vg "ls --json --at main~1" 0 ls "$D" --json --at main~1
vg "log" 0 log "$D"
vg "log --json" 0 log "$D" --json
vg "cat (summary)" 0 cat "$D" images 3
vg "cat --raw" 0 cat "$D" images 30 --raw
vg "cat --npy of a variable shape, zstd" 0 cat "$D" boxes 5 --npy
vg "cat --json of a label" 0 cat "$D" labels 7 --json
vg "cat --png" 0 cat "$D" images 1 --png
vg "cat --at main~1" 0 cat "$D" boxes 2 --at main~1
vg "cat past the end (error path)" 3 cat "$D" images 999
vg "verify --deep" 0 verify "$D" --deep
vg "verify --all --deep --json" 0 verify "$D" --all --deep --json
vg "bench-stream cpu, shuffled, 2 epochs, 3 workers" 0 bench-stream "$D" \
    --device cpu --shuffle --epochs 2 --workers 3 --batch-size 8 --json
check "checksum_ok" grep -q '"checksum_ok": true' "$OUT"
vg "bench-stream --at main~1 --tensors images" 0 bench-stream "$D" \
    --device cpu --at main~1 --tensors images --batch-size 5

J=$T/jpgds
vg "create from-dir of JPEGs (one broken file)" 0 create "$J" from-dir "$JPG" \
    --resize 32x24 --jobs 2 --fetch 4 --chunk-size 8K --json
check "16 rows, 1 error reported" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==16 and len(d["errors"])==1, d' "$OUT"
vg "create again is refused: the dataset exists" 2 create "$J" from-dir "$JPG" --resize 32x24 --json
vg "create again with --exist-ok is a no-op" 0 create "$J" from-dir "$JPG" --resize 32x24 --json --exist-ok
vg "ingest --on-error fail (error path)" 3 ingest "$J" from-dir "$JPG" \
    --resize 32x24 --on-error fail --no-resume
vg "commit JPEG dataset" 0 commit "$J" -m jpegs
vg "cat --png of an image" 0 cat "$J" images 3 --png
vg "cat of a class label" 0 cat "$J" labels 9
vg "verify --all --deep" 0 verify "$J" --all --deep
# an unreferenced chunk, old enough for gc
mkdir -p "$J/chunks/images"
cp "$(ls "$J"/chunks/images/* | head -n 1)" "$J/chunks/images/00000000000000000000000000000000"
touch -d '2 hours ago' "$J/chunks/images/00000000000000000000000000000000"
vg "gc --dry-run" 0 gc "$J" --dry-run --json
vg "gc" 0 gc "$J" --json
check "gc removed the stray chunk" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["removed"]>=1, d' "$OUT"
vg "bench-stream of the JPEG dataset" 0 bench-stream "$J" --device cpu \
    --shuffle --workers 2 --batch-size 4 --epochs 2

# the S3 store: libcurl, the request engine thread, listings, multipart
if [ "${DLK_VALGRIND_S3:-1}" != 0 ]; then
    . "$DLK_TESTS/s3lib.sh"
    s3_start
    s3_mkbucket dlk-t430
    python3 - "$JPG" <<'EOF'
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        s3.upload_file(p, "dlk-t430", "src/" + os.path.relpath(p, sys.argv[1]))
EOF
    S=s3://dlk-t430/ds
    vg "s3: create from-s3" 0 create "$S" from-s3 s3://dlk-t430/src \
        --resize 32x24 --jobs 2 --fetch 4 --chunk-size 8K --json
    check "s3: 16 rows" grep -q '"ingested": 16' "$OUT"
    vg "s3: commit" 0 commit "$S" -m s3
    vg "s3: ls --at main" 0 ls "$S" --at main
    vg "s3: cat --raw" 0 cat "$S" images 4 --raw
    vg "s3: verify --all --deep" 0 verify "$S" --all --deep
    vg "s3: gc" 0 gc "$S" --grace 0 --json
    vg "s3: bench-stream" 0 bench-stream "$S" --device cpu --shuffle \
        --workers 3 --batch-size 4 --epochs 2 --json
    check "s3: checksum_ok" grep -q '"checksum_ok": true' "$OUT"
    vg "s3: missing dataset (error path)" 3 ls s3://dlk-t430/nothing-here
fi
