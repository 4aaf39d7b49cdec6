#!/usr/bin/env bash
# The media decoders: generate the fixtures (tests/fixtures/make_media.sh),
# have Pillow decode the images as references (NAME.MODE.ref: u32 LE
# width and height, then the pixels, EXIF orientation applied), run the
# unit test build/tests/test_decode over them, and check `dlk cat --png`
# and `--frame` end to end.  Skipped without ffmpeg, convert or Pillow.
. "$DLK_TESTS/lib.sh"
root=$(cd "$DLK_TESTS/.." && pwd)
M=$T/media

if ! python3 -c 'import PIL, numpy' 2>/dev/null; then
    skip "media decoders" "needs Pillow and numpy: python3 -m pip install pillow numpy"
    exit 0
fi
"$root/tests/fixtures/make_media.sh" "$M" >"$OUT" 2>"$ERR"
rc=$?
if [ "$rc" -eq 77 ]; then
    skip "media decoders" "$(cat "$ERR")"
    exit 0
fi
_report "generate the media fixtures" "$rc" 0 || exit 1

ok "Pillow reference decodes" python3 - "$M" <<'EOF'
import struct, sys
import numpy as np
from PIL import Image, ImageOps
d = sys.argv[1]
def put(name, a):
    a = np.ascontiguousarray(a, dtype=np.uint8)
    h, w = a.shape[:2]
    open(f"{d}/{name}.ref", "wb").write(struct.pack("<II", w, h) + a.tobytes())
refs = {
    "base500.jpg": "RGB L", "base320_444.jpg": "RGB", "base101.jpg": "RGB RGBA",
    "prog500.jpg": "RGB", "gray320.jpg": "L RGB", "cmyk320.jpg": "RGB",
    "exif6.jpg": "RGB", "exif3.jpg": "RGB", "exif8.jpg": "RGB", "exif5.jpg": "RGB",
    "src320.png": "RGB L", "src500.png": "RGB", "pal.png": "RGB",
    "pal_trns.png": "RGB RGBA", "gray.png": "L RGB", "gray1.png": "L",
    "gray_alpha.png": "L RGB RGBA", "rgb16.png": "RGB", "rgba8.png": "RGBA RGB L",
    "interlaced.png": "RGB",
}
for f, modes in refs.items():
    im = Image.open(f"{d}/{f}")
    im = ImageOps.exif_transpose(im)
    for m in modes.split():
        put(f"{f}.{m}", np.asarray(im.convert(m)))
# Pillow reads 16-bit gray as I;16 and clips it into L; dlk (like Pillow
# for 16-bit RGB) keeps the high byte.
put("gray16.png.L", np.asarray(Image.open(f"{d}/gray16.png")).astype(np.uint16) >> 8)
EOF

DLK_MEDIA_DIR=$M "$DLK_BUILD/tests/test_decode" >"$T/unit.log" 2>&1
rc=$?
grep -E '^(not )?ok - ' "$T/unit.log"
if [ "$rc" -ge 128 ]; then
    echo "not ok - test_decode killed by signal $((rc - 128))"
    tail -n 30 "$T/unit.log" | sed 's/^/#   /'
elif [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$T/unit.log"; then
    echo "not ok - test_decode exited with $rc"
    tail -n 30 "$T/unit.log" | sed 's/^/#   /'
fi

# dlk cat --png / --frame over a dataset holding Pillow's pixels.
python3 - "$M" "$T/src" <<'EOF'
import sys, os
import numpy as np
from PIL import Image
m, s = sys.argv[1], sys.argv[2]
os.makedirs(s)
img = np.asarray(Image.open(f"{m}/src101.png").convert("RGB"))        # 77x101x3
clip = np.stack([img, img[::-1], 255 - img])                          # 3x77x101x3
np.save(f"{s}/0.img.npy", img)
np.save(f"{s}/0.chw.npy", np.ascontiguousarray(img.transpose(2, 0, 1)))
np.save(f"{s}/0.gray.npy", img[:, :, 0].copy())
np.save(f"{s}/0.clip.npy", clip)
np.save(f"{s}/0.vec.npy", np.arange(4, dtype=np.float32))
EOF
DS=$(ds_url ds)
ok "create an image dataset" dlk create "$DS" --tensor img:u8:77x101x3 \
    --tensor chw:u8:3x77x101 --tensor gray:u8:77x101 \
    --tensor clip:u8:3x77x101x3 --tensor vec:f32:4
ok "ingest it" dlk ingest "$DS" from-dir "$T/src" -q

same_png() { # PNG NPY [FRAME]
    python3 - "$@" <<'EOF'
import sys
import numpy as np
from PIL import Image
a = np.asarray(Image.open(sys.argv[1]))
b = np.load(sys.argv[2])
if len(sys.argv) > 3:
    b = b[int(sys.argv[3])]
if b.ndim == 3 and b.shape[0] == 3 and b.shape[2] != 3:
    b = b.transpose(1, 2, 0)
assert a.shape == b.shape and (a == b).all(), (a.shape, b.shape)
EOF
}
ok "cat --png of [H,W,3]" sh -c "\"$DLK\" cat \"$DS\" img 0 --png > \"$T/img.png\""
check "the PNG has the sample's pixels" same_png "$T/img.png" "$T/src/0.img.npy"
ok "cat --png of [3,H,W]" sh -c "\"$DLK\" cat \"$DS\" chw 0 --png > \"$T/chw.png\""
check "CHW detected from the shape" same_png "$T/chw.png" "$T/src/0.img.npy"
ok "cat --png of [H,W]" sh -c "\"$DLK\" cat \"$DS\" gray 0 --png > \"$T/gray.png\""
check "a gray PNG" same_png "$T/gray.png" "$T/src/0.gray.npy"
ok "cat --frame 2 of a clip" sh -c "\"$DLK\" cat \"$DS\" clip 0 --frame 2 > \"$T/f2.png\""
check "frame 2 is the inverted image" same_png "$T/f2.png" "$T/src/0.clip.npy" 2
fails "cat --png of a clip without --frame" 3 dlk cat "$DS" clip 0 --png
check "says to choose a frame" grep -q "choose one" "$ERR"
fails "cat --frame past the end" 3 dlk cat "$DS" clip 0 --frame 3
check "names the frame count" grep -q "the clip has 3" "$ERR"
fails "cat --png of an f32 tensor" 3 dlk cat "$DS" vec 0 --png
check "says it is not an image" grep -q "not an image" "$ERR"
fails "cat --frame with a bad number" 2 dlk cat "$DS" clip 0 --frame x
fails "cat --png with --npy" 2 dlk cat "$DS" img 0 --png --npy
