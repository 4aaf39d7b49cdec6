#!/usr/bin/env bash
# report_png.sh - a picture of bench-stream's report page, as the README
# shows: headless Chromium renders the page 1040 px wide, and the blank
# rows below it are cut (or the picture ends at MAX_HEIGHT px).
#
#   tests/bench/report_png.sh REPORT.html OUT.png [MAX_HEIGHT]
#
# The page comes from `dlk bench-stream ... --report REPORT.html` (or
# `dlk bench-report`) on any machine; rendering needs chromium (Debian's
# package, scripts/deps.sh) and Pillow where it runs, not the GPU machine.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 REPORT.html OUT.png [MAX_HEIGHT]" >&2; exit 2; }
html=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=$2
max=${3:-8000}
command -v chromium >/dev/null || { echo "$0: chromium missing (apt-get install chromium)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$tmp/profile" --window-size=1040,"$max" \
    --screenshot="$tmp/full.png" "file://$html" >/dev/null 2>&1
python3 - "$tmp/full.png" "$out" <<'PY'
import sys
from PIL import Image, ImageChops
im = Image.open(sys.argv[1]).convert("RGB")
box = ImageChops.difference(im, Image.new("RGB", im.size, (255, 255, 255))).getbbox()
bottom = min(im.size[1], box[3] + 24) if box else im.size[1]
im.crop((0, 0, im.size[0], bottom)).save(sys.argv[2], optimize=True)
print("%s: %dx%d" % (sys.argv[2], im.size[0], bottom))
PY
