#!/usr/bin/env bash
# Images as cameras and editors write them: JPEGs with extraneous bytes
# before a marker decode to the clean file's pixels (a truncated JPEG
# still fails, with junk or without); a PNG's eXIf orientation is applied as a JPEG's is.
. "$DLK_TESTS/lib.sh"
if ! python3 -c 'import PIL, numpy' 2>/dev/null; then
    skip "image quirks" "needs Pillow and numpy: python3 -m pip install pillow numpy"
    exit 0
fi

S=$T/src
mkdir -p "$S" "$T/o"
python3 - "$S" "$T/o" <<'EOF'
import io, sys
from PIL import Image
s, o = sys.argv[1], sys.argv[2]
im = Image.effect_mandelbrot((96, 64), (-2, -1.2, 1, 1.2), 60).convert("RGB")
b = io.BytesIO(); im.save(b, "JPEG", quality=90); d = b.getvalue()
open(f"{s}/a-clean.jpg", "wb").write(d)
# garbage before the first DHT, before SOS, and before the EXIF APP1
for name, marker in (("b-dht", b"\xff\xc4"), ("c-sos", b"\xff\xda")):
    i = d.index(marker)
    open(f"{s}/{name}.jpg", "wb").write(d[:i] + b"\x00\x12\x34\x56" + d[i:])
open(f"{s}/d-truncated.jpg", "wb").write(d[: len(d) * 2 // 3])
# junk, then the file cut short: the junk's warning must not hide the cut
i = d.index(b"\xff\xc4"); j = d[:i] + b"\x00\x12" + d[i:]
open(f"{s}/e-junk-truncated.jpg", "wb").write(j[: len(j) * 2 // 3])
# orientation 6 (turn 90 degrees clockwise) in a PNG's eXIf and in a JPEG
exif = Image.Exif(); exif[0x0112] = 6
im.save(f"{o}/e-exif6.png", exif=exif.tobytes())
b = io.BytesIO(); im.save(b, "JPEG", quality=95, exif=exif.tobytes()); e = b.getvalue()
open(f"{o}/f-exif6.jpg", "wb").write(e)
i = e.index(b"\xff\xe1")  # extraneous bytes before APP1: EXIF still read
open(f"{o}/g-exif6-junk.jpg", "wb").write(e[:i] + b"\x00\x00\x07" + e[i:])
EOF

DS=$(ds_url ds)
ok "ingest JPEGs with extraneous bytes" dlk create "$DS" from-dir "$S" --json --max-skip 1
check "3 decoded; only the truncated ones skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==3 and d["skipped"]==2, d
assert [e["key"] for e in d["errors"]]==["d-truncated.jpg", "e-junk-truncated.jpg"], d["errors"]
assert all("Premature end" in e["reason"] for e in d["errors"]), d["errors"]' "$OUT"
dump "$DS" > "$T/dump.txt"
check "extraneous bytes before DHT and SOS: the clean pixels" python3 -c '
import sys; h=[l.split()[2] for l in open(sys.argv[1]) if l.startswith("images ")]
assert len(h)==3 and h[0]==h[1]==h[2], h' "$T/dump.txt"

DS2=$(ds_url exif)
ok "ingest a PNG and JPEGs with EXIF orientation 6" dlk create "$DS2" from-dir "$T/o" --json
check "3 ingested" grep -q '"ingested": 3' "$OUT"
for i in 0 1 2; do "$DLK" cat "$DS2" images $i --raw > "$T/o/$i.raw"; done
check "the PNG comes out turned, exactly as Pillow's exif_transpose" python3 -c '
import sys
import numpy as np
from PIL import Image, ImageOps
d = sys.argv[1]
ref = np.asarray(ImageOps.exif_transpose(Image.open(d + "/e-exif6.png")).convert("RGB"))
assert ref.shape == (96, 64, 3), ref.shape
png = np.fromfile(d + "/0.raw", np.uint8)
assert png.size == ref.size and (png.reshape(ref.shape) == ref).all()
for f in ("1.raw", "2.raw"):  # the JPEGs: turned the same way (lossy)
    j = np.fromfile(d + "/" + f, np.uint8).reshape(ref.shape).astype(int)
    assert np.abs(j - ref).mean() < 4, (f, np.abs(j - ref).mean())' "$T/o"
