#!/usr/bin/env bash
# Bad source objects: each is skipped and reported with its key and reason
# (--on-error skip), or stops the run naming it with the dataset exactly
# as before (--on-error fail).
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest errors" "ffmpeg missing"; exit 0; }

G=$T/good
mkdir -p "$G" "$T/bad"
ff -f lavfi -i "testsrc2=s=500x375:r=10" -frames:v 2 -q:v 3 "$G/good%d.jpg"
ff -f lavfi -i "mandelbrot=s=120x90" -frames:v 1 "$G/good3.png"
B=$T/bad
head -c 6000 "$G/good1.jpg" > "$B/truncated.jpg"
echo "this is text, not an image" > "$B/text.jpg"
: > "$B/zero.jpg"
python3 - "$G/good3.png" "$B/badcrc.png" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
i = d.index(b"IDAT") + 40
d[i] ^= 0x55
open(sys.argv[2], "wb").write(bytes(d))
PY
ff -f lavfi -i "sine=frequency=440:duration=1" -c:a aac "$B/novideo.mp4"
ff -f lavfi -i "testsrc2=s=640x480" -frames:v 1 -q:v 3 "$B/huge.jpg"
cp "$G/good2.jpg" "$B/nolabel.jpg"
cases="truncated.jpg text.jpg zero.jpg badcrc.png novideo.mp4 huge.jpg nolabel.jpg"

{
    echo key,label
    for f in good1.jpg good2.jpg good3.png truncated.jpg text.jpg zero.jpg badcrc.png novideo.mp4 huge.jpg; do
        echo "$f,x"
    done
} > "$T/labels.csv"

S=$T/all
mkdir -p "$S"
cp "$G"/* "$B"/* "$S/"
schema="--tensor images:u8:32x32x3 --tensor labels:i32 --tensor video:u8:2x32x32x3 --kind video=video --classes labels=x,y"
DS=$(ds_url skip)
# shellcheck disable=SC2086
ok "create with a schema" dlk create "$DS" $schema
# every row is bad (an image row has no video): none ingested, exit 3,
# and the --json summary still reports each one
fails "skip: ingest goes on, and fails with no row ingested" 3 dlk ingest "$DS" from-dir "$S" --labels "$T/labels.csv" --max-pixels 200000 --frames 2 --json --max-skip 1
check "good rows in, each bad key reported with a reason" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
# rows without a video have no value for "video": every image row is bad
# here, so check the report, not the count
keys={e["key"] for e in d["errors"]}
for k in sys.argv[2].split():
    assert k in keys, (k, d["errors"])
assert all(e["reason"] for e in d["errors"]), d' "$OUT" "$cases"

# With a schema of images and labels only (no video tensor), the video row
# has nothing to feed: an image-less, label-less row is an error as well.
DS=$(ds_url skip2)
ok "create images+labels" dlk create "$DS" --tensor images:u8:32x32x3 --tensor labels:i32 --classes labels=x,y
ok "skip mode" dlk ingest "$DS" from-dir "$S" --labels "$T/labels.csv" --max-pixels 200000 --json --max-skip 1
check "3 ingested, 7 skipped, keys and reasons" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==3 and d["skipped"]==7, d
r={e["key"]:e["reason"] for e in d["errors"]}
assert set(r)==set(sys.argv[2].split()), r
assert "label" in r["nolabel.jpg"] and "labels.csv" in r["nolabel.jpg"], r
assert "pixels" in r["huge.jpg"] or "max" in r["huge.jpg"], r
print(r)' "$OUT" "$cases"
ok "text report names the keys" dlk ingest "$DS" from-dir "$S" --labels "$T/labels.csv" --max-pixels 200000 --no-resume --max-skip 1
check "stderr names truncated.jpg" grep -q "skipped 'truncated.jpg'" "$ERR"

for c in $cases; do
    D=$T/f-${c%%.*}
    mkdir -p "$D"
    cp "$G"/* "$D/"
    cp "$B/$c" "$D/"
    DS=$(ds_url "fail-${c%%.*}")
    ok "fail/$c: create" dlk create "$DS" --tensor images:u8:32x32x3 --tensor labels:i32 --classes labels=x,y
    ok "fail/$c: a first good ingest" dlk ingest "$DS" from-dir "$G" --labels "$T/labels.csv" --quiet
    obj_get "$DS" staging/manifest.json "$T/before.json"
    fails "fail/$c: stops with exit 3" 3 dlk ingest "$DS" from-dir "$D" --labels "$T/labels.csv" --max-pixels 200000 --on-error fail
    check "fail/$c: the message names the key" grep -q "'$c'" "$ERR"
    obj_get "$DS" staging/manifest.json "$T/after.json"
    check "fail/$c: the head is byte for byte as before" cmp "$T/before.json" "$T/after.json"
done

# FFmpeg is opened on the first video decode: where it cannot be (a
# stand-in libavutil first in the library path, whose own dependency is
# missing, or that lacks FFmpeg's functions), a video row is skipped with
# the library and the package to install named, and images still ingest.
V=$T/video
mkdir -p "$V"
ff -f lavfi -i "testsrc2=s=64x48:r=10:d=1" -c:v mpeg4 "$V/clip.avi"
cp "$G/good1.jpg" "$V/"
printf 'key,label\nclip.avi,x\ngood1.jpg,y\n' > "$T/vlabels.csv"
avmajor=$(pkg-config --modversion libavutil | cut -d. -f1)
mkdir -p "$T/noav" "$T/emptyav"
echo 'int dlk_test_stand_in;' > "$T/stand_in.c"
ok "a stand-in needing a missing library" cc -shared -fPIC -o "$T/noav/libdlk_test_gone.so" "$T/stand_in.c"
ok "a libavutil.so.$avmajor that needs it" cc -shared -fPIC -Wl,--no-as-needed -o "$T/noav/libavutil.so.$avmajor" \
    "$T/stand_in.c" -L"$T/noav" -ldlk_test_gone
rm -f "$T/noav/libdlk_test_gone.so"
ok "a libavutil.so.$avmajor without FFmpeg's functions" cc -shared -fPIC \
    -o "$T/emptyav/libavutil.so.$avmajor" "$T/stand_in.c"
vschema="--tensor video:u8:2x32x32x3 --tensor labels:i32 --kind video=video --classes labels=x,y"
DS=$(ds_url video-ok)
# shellcheck disable=SC2086
ok "video: create" dlk create "$DS" $vschema
ok "video: ingests with FFmpeg" dlk ingest "$DS" from-dir "$V" --labels "$T/vlabels.csv" --frames 2 --json --max-skip 1
check "video: the clip ingested (the image has no video)" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==1 and [e["key"] for e in d["errors"]]==["good1.jpg"], d' "$OUT"
for lib in noav emptyav; do
    DS=$(ds_url "video-$lib")
    # shellcheck disable=SC2086
    ok "video/$lib: create" env LD_LIBRARY_PATH="$T/$lib" "$DLK" create "$DS" $vschema
    fails "video/$lib: no row ingested" 3 env LD_LIBRARY_PATH="$T/$lib" "$DLK" ingest "$DS" from-dir "$V" \
        --labels "$T/vlabels.csv" --frames 2 --json --max-skip 1
    check "video/$lib: the clip skipped, naming libavutil.so.$avmajor" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
r={e["key"]:e["reason"] for e in d["errors"]}
assert d["ingested"]==0 and set(r)=={"clip.avi","good1.jpg"}, d
assert "clip.avi" in r["clip.avi"] and "libavutil.so."+sys.argv[2] in r["clip.avi"], r
want = ("cannot be loaded (install it: apt-get install libavutil"+sys.argv[2]
        if sys.argv[3]=="noav" else "has no av_")
assert want in r["clip.avi"], r
print(r["clip.avi"])' "$OUT" "$avmajor" "$lib"
    DS=$(ds_url "images-$lib")
    ok "video/$lib: images still ingest" env LD_LIBRARY_PATH="$T/$lib" "$DLK" create "$DS" \
        --tensor images:u8:32x32x3 --tensor labels:i32 --classes labels=x,y
    ok "video/$lib: ingest of the images" env LD_LIBRARY_PATH="$T/$lib" "$DLK" ingest "$DS" \
        from-dir "$G" --labels "$T/labels.csv" --json
    check "video/$lib: 3 images in" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==3, d' "$OUT"
done
