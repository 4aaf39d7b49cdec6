#!/usr/bin/env bash
# t397-bench-report.sh - bench-stream --report and dlk bench-report: the
# page is one self-contained HTML file (no script, nothing fetched) whose
# SVG charts are valid XML and hold what the run measured (a timeline
# bucket per run of batches, bounded in number however many batches;
# the rate, the time split, the stages, memory and requests; the per-file
# baseline on the same axes); the text report explains busy, stalled and
# the rest and names the flag most likely to help from what was measured;
# several ranks' JSON reports make one page that names the straggler; and
# headless Chromium renders every chart with something drawn on it.
. "$DLK_TESTS/lib.sh"

python3 -c 'import PIL' 2>/dev/null || { skip "bench-stream --report" "pillow missing (pip install pillow)"; exit 0; }

# 1500 small PNGs in chunks of 64 KiB: 72 chunks, many batches
mkdir -p "$T/png"
check "1500 small PNGs" python3 -c '
import sys
from PIL import Image
for i in range(1500):
    im = Image.new("RGB", (32, 32), (i % 256, (i * 7) % 256, 90))
    im.putpixel((i % 32, (i // 32) % 32), (255, 255, 255))
    im.save("%s/p%04d.png" % (sys.argv[1], i))' "$T/png"
ok "a dataset of them, zstd, 64 KiB chunks" dlk create "$T/ds" from-dir "$T/png" \
    --tensor images:u8:32x32x3:zstd --chunk-size 64K --quiet

# what a page must be: one document, its SVGs XML, its charts there, and
# nothing fetched (the only URL is the SVG namespace, a name, not a fetch)
cat >"$T/page.py" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
from html.parser import HTMLParser
page = open(sys.argv[1], encoding="utf-8").read()
want = sys.argv[2].split(",")
assert page.startswith("<!DOCTYPE html>"), page[:40]
VOID = {"meta", "br", "hr", "img", "input", "link"}
class P(HTMLParser):
    def __init__(self):
        super().__init__(); self.stack = []
    def handle_starttag(self, t, a):
        if t not in VOID: self.stack.append(t)
    def handle_startendtag(self, t, a): pass
    def handle_endtag(self, t):
        assert self.stack and self.stack[-1] == t, (t, self.stack[-5:])
        self.stack.pop()
p = P(); p.feed(page); p.close()
assert p.stack == [], p.stack
for bad in ("<script", "<link", "<img", "<iframe", "src=", "href=", "url(", "@import"):
    assert bad not in page.lower(), bad
urls = set(re.findall(r"https?://[^\s\"'<>)]*", page))
assert urls <= {"http://www.w3.org/2000/svg"}, urls
svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
ids = []
for s in svgs:
    root = ET.fromstring(s)        # valid XML, or this raises
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    ids.append(root.get("id"))
for w in want:
    assert w in ids, (w, ids)
print(" ".join(ids))
EOF

ok "bench-stream --report on the cpu: 4 epochs of 750 batches, one I/O thread" \
    dlk bench-stream "$T/ds" --device cpu --epochs 4 --batch-size 2 \
    --workers 1 --report "$T/r.html"
cp "$OUT" "$T/r.txt"
check "the page is one HTML document, its SVGs valid XML, nothing fetched" \
    python3 "$T/page.py" "$T/r.html" timeline,rate,split,stages,memory,requests,bytes
check "... with the legend of each chart and the flags that move it" python3 -c '
import sys; p = open(sys.argv[1]).read()
for w in ("Timeline of the batches", "Samples per second", "Where the time went",
          "Memory", "Storage requests and bytes", "Settings, machine and dataset",
          "--workers", "--prefetch", "--pin-cache auto", "--memory", "--step-ms",
          "waiting: chunk in storage", "rank 0", "cores"):
    assert w in p, w' "$T/r.html"
check "... and the run's settings and dataset" python3 -c '
import sys; p = open(sys.argv[1]).read()
for w in ("--batch-size 2", "batch 2, 1 workers", "u8 32x32x3, zstd, 72 chunks", "1500 rows"):
    assert w in p, w' "$T/r.html"

ok "the same run's JSON report" dlk bench-stream "$T/ds" --device cpu --epochs 4 \
    --batch-size 2 --workers 1 --json --report "$T/r.json"
cp "$OUT" "$T/stdout.json"
check "--report FILE.json holds what --json prints" python3 -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["samples"] == b["samples"] == 6000 and a["batches"] == 3000, (a["samples"], a["batches"])
assert a.keys() == b.keys(), a.keys() ^ b.keys()' "$T/r.json" "$T/stdout.json"
check "the timeline: at most 512 buckets covering every batch once, in order" python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); tl = d["timeline"]; c = tl["columns"]
rows = [dict(zip(c, r)) for r in tl["buckets"]]
assert 256 <= len(rows) <= 512, len(rows)
assert tl["batches_per_bucket"] >= 8, tl["batches_per_bucket"]   # 3000 batches merged
assert sum(r["batches"] for r in rows) == d["batches"], sum(r["batches"] for r in rows)
assert sum(r["samples"] for r in rows) == d["samples"], sum(r["samples"] for r in rows)
nxt = 0
for r in rows:
    assert r["first_batch"] == nxt, (r, nxt); nxt += r["batches"]
    assert 0 <= r["t0"] <= r["t1"] <= d["seconds"] + 0.01, r
    assert 0 <= r["wait_s"] <= r["loader_s"] + 1e-6 <= r["t1"] - r["t0"] + 2e-6, r
    late = r["late_queued_s"] + r["late_storage_s"] + r["late_host_to_device_s"]
    assert late <= r["wait_s"] + 1e-6, r
assert [r["epoch"] for r in rows] == sorted(r["epoch"] for r in rows)
assert rows[0]["epoch"] == 0 and rows[-1]["last_epoch"] == 3, (rows[0], rows[-1])
assert all(r["buffer_bytes"] > 0 for r in rows), "chunk buffers"
# its start on the host monotonic clock: before now, within the run
import time
ago = time.monotonic() - tl["start_monotonic_s"]
assert d["seconds"] <= ago < d["seconds"] + 300, (ago, d["seconds"])
s = tl["series"]; sc = tl["series_columns"]
assert 2 <= len(s) <= 256 and all(p[sc.index("rss")] > 0 for p in s), s[:3]
assert s[-1][sc.index("requests")] >= 1 and s[-1][sc.index("bytes_read")] > 0, s[-1]' "$T/r.json"
check "the waits the buckets hold are the run's, split by stage" python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); tl = d["timeline"]; c = tl["columns"]
wait = sum(r[c.index("wait_s")] for r in tl["buckets"])
ts = d["time_split"]
assert abs(100 * wait / d["seconds"] - d["stall_pct"]) < 0.5, (wait, d["stall_pct"])
assert abs(ts["stalled_pct"] - d["stall_pct"]) < 0.5, ts
late = ts["late_pct"]
# the waits proper; the rest of wait_s is taking the lock and looking
assert wait == 0 or 90 <= sum(late.values()) <= 100.5, late' "$T/r.json"
check "on the cpu busy, stalled and the rest add up to 100%" python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["time_split"]
s = t["busy_pct"] + t["stalled_pct"] + t["loader_pct"] + t["consumer_pct"] + t["outside_pct"]
assert abs(s - 100) < 1.5, (s, t)' "$T/r.json"
check "settings, machine and dataset are in the report" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
s, m, ds = d["settings"], d["machine"], d["dataset_info"]
assert s["batch_size"] == 2 and s["workers"] == 1 and s["epochs"] == 4, s
assert "--report" in s["command"] and m["cores"] >= 1 and m["memory_bytes"] > 0, (s, m)
assert m["gpu"] == "" and ds["rows"] == 1500, (m, ds)
assert [t["name"] for t in ds["tensors"]][0] == "images", ds
assert ds["tensors"][0]["chunks"] == 72 and ds["tensors"][0]["codec"] == "zstd", ds' "$T/r.json"

# the text explains the time and, storage-bound (one I/O thread reading,
# checking and decompressing chunks for a consumer with no step), names
# what would help
check "the text says what busy, stalled and the rest are" \
    grep -qE "^  time: busy [0-9.]+% \(gathering batches and the step\), stalled [0-9.]+% \(waiting for chunks\), the other [0-9.]+%: [0-9.]+% in the loader otherwise" "$T/r.txt"
check "... when the stalls happened and what the chunks waited in" \
    grep -qE "^  stalls: [0-9]+% of the waiting in the first epoch, [0-9]+% at later epochs' starts .*queued [0-9]+%, in storage [0-9]+%" "$T/r.txt"
check "storage-bound with one I/O thread: the hint is from the measures" python3 -c '
import json, os, sys
d = json.load(open(sys.argv[1])); h = d["hint"]
assert d["bottleneck"] in ("storage", "decompress"), d["bottleneck"]
assert h["why"] and h["flag"], h
assert d["stall_pct"] >= 5, d["stall_pct"]
assert h["flag"] in ("--workers 2", "a faster store", "more cores", "--prefetch 32",
                     "--memory") \
    or h["flag"].startswith("CPU for decompression"), h
assert "I/O thread" in h["why"] and "%" in h["why"], h' "$T/r.json"
check "... and the text names it with the measures" grep -qE \
    "^  most likely to help: (--workers 2|a faster store|more cores|--prefetch 32|--memory|CPU for decompression.*) \(.*I/O thread.*[0-9]+%" "$T/r.txt"
ncores=$(nproc)
LOCAL_WORLD_SIZE=$ncores ok "the same as one of $ncores ranks on this host (a core each)" \
    dlk bench-stream "$T/ds" --device cpu --batch-size 2 --workers 1 --json
check "... never asks for more threads than its share of the cores" python3 -c '
import json, sys
h = json.load(open(sys.argv[1]))["hint"]
assert not h["flag"].startswith("--workers"), h
assert "cores" not in h["why"] or "this rank" in h["why"], h' "$OUT"
check "... a store or cores as the threads' CPU time says (the pages cached)" python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1])); h = d["hint"]
assert 0 < d["io_cpu_s"] <= d["io_busy_s"] + 1e-6, (d["io_cpu_s"], d["io_busy_s"])
if h["flag"] in ("more cores", "a faster store"):
    pct = float(re.search(r"([0-9]+)% of it on or waiting for a CPU", h["why"]).group(1))
    share = 100 * d["io_cpu_s"] / d["io_busy_s"]
    assert abs(pct - share) <= 1, (pct, d)
    assert (h["flag"] == "more cores") == (share >= 60), (h, share)' "$OUT"
# (24 steps of 50 ms: a thread held off the CPU for 30 ms on a busy
# machine, as CI's two passes side by side do, is then 2.5% of the run
# and not the 5% that counts as waiting)
ok "a step-bound run (50 ms a batch, 4 workers, 4 epochs)" dlk bench-stream "$T/ds" \
    --device cpu --batch-size 256 --workers 4 --step-ms 50 --epochs 4 --json
check "... names no flag: the loader keeps up" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bottleneck"] == "step" and d["hint"]["flag"] == "", (d["bottleneck"], d["hint"])
assert d["time_split"]["busy_pct"] > 50, d["time_split"]' "$OUT"

# ranks: names, and one page with every rank
ok "rank 1 of 2 with --report run.html" dlk bench-stream "$T/ds" --device cpu \
    --rank 1 --world 2 --batch-size 16 --report "$T/run.html"
check "... writes run.rank1.html (ranks sharing a file system)" test -s "$T/run.rank1.html"
check "... and not run.html" test ! -e "$T/run.html"
ok "rank 0 of 2 with --report rank%r.json" dlk bench-stream "$T/ds" --device cpu \
    --rank 0 --world 2 --batch-size 16 --workers 2 --report "$T/rank%r.json"
ok "rank 1 of 2, slower (a 15 ms step)" dlk bench-stream "$T/ds" --device cpu \
    --rank 1 --world 2 --batch-size 16 --workers 2 --step-ms 15 --report "$T/rank%r.json"
ok "bench-report draws both" dlk bench-report "$T/all.html" "$T/rank1.json" "$T/rank0.json"
check "... and prints the ranks together: their samples/s summed" python3 -c '
import json, re, sys
line = open(sys.argv[1]).read()
r = [json.load(open(f)) for f in sys.argv[2:]]
m = re.search(r"2 ranks, together (\d+) samples/s, ([0-9.]+) GB/s .*least busy: rank (\d), ([0-9.]+)%", line)
assert m, line
assert abs(int(m.group(1)) - sum(x["samples_per_s"] for x in r)) <= 1, line
assert abs(float(m.group(2)) - sum(x["bytes_per_s"] for x in r) / 1e9) < 0.01, line
least = min(r, key=lambda x: x["gpu_busy_pct"])
assert int(m.group(3)) == least["rank"], (line, least["rank"])' "$OUT" "$T/rank0.json" "$T/rank1.json"
check "... and a row of them together on the page" grep -q "<td><b>all</b></td>" "$T/all.html"
check "... one valid page" python3 "$T/page.py" "$T/all.html" timeline,rate,split,stages,memory,requests,bytes
check "... a lane per rank, the straggler named" python3 -c '
import re, sys
p = open(sys.argv[1]).read()
tl = re.search(r"<svg[^>]*id=\"timeline\".*?</svg>", p, re.S).group(0)
assert ">rank 0</text>" in tl and ">rank 1</text>" in tl, "lanes"
assert "Rank 1 is the straggler" in p, "straggler"
assert tl.index(">rank 0<") < tl.index(">rank 1<"), "ranks in order"' "$T/all.html"
# the ranks of a host share its terminal: each rank's text report leaves
# in one write (with a terminal's line buffering, a line a write, the
# ranks' lines mixed)
if command -v strace >/dev/null && command -v script >/dev/null &&
        strace -o /dev/null true 2>/dev/null; then
    # LeakSanitizer stops a process that is traced (the sanitizer build)
    noleak=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0
    ASAN_OPTIONS=$noleak RANK=1 WORLD_SIZE=2 ok "rank 1 of 2 writing to a terminal, traced" \
        script -qec "strace -s 4096 -e trace=write -o '$T/st.txt' '$DLK' bench-stream \
        '$T/ds' --device cpu --epochs 2" /dev/null
    check "... its report in one write" test "$(grep -c '^write(1,' "$T/st.txt")" = 1
    check "... the whole report" grep -q '^write(1, "dlk bench-stream .*rank 1 of 2' "$T/st.txt"
    ASAN_OPTIONS=$noleak ok "one process writing to a terminal, traced" \
        script -qec "strace -e trace=write -o '$T/st1.txt' '$DLK' bench-stream \
        '$T/ds' --device cpu --epochs 2" /dev/null
    check "... a line a write, as a terminal's output is" \
        test "$(grep -c '^write(1,' "$T/st1.txt")" -gt 5
else
    skip "a rank's report in one write" "no strace or script, or ptrace not allowed here"
fi
fails "bench-report with no report: bad usage" 2 dlk bench-report "$T/x.html"
fails "bench-report of the same rank twice: bad usage" 2 dlk bench-report \
    "$T/x.html" "$T/rank0.json" "$T/rank0.json"
echo '{"rank": 0}' >"$T/not-a-report.json"
fails "bench-report of a JSON without a timeline: fails" 3 dlk bench-report \
    "$T/x.html" "$T/not-a-report.json"
check "... naming the file" grep -q "not-a-report.json' has no timeline" "$ERR"
fails "bench-report of an HTML page: fails" 3 dlk bench-report "$T/x.html" "$T/r.html"
check "... and writes no page" test ! -e "$T/x.html"
fails "--report into a directory that does not exist: fails" 3 dlk bench-stream \
    "$T/ds" --device cpu --report "$T/no/such/dir/r.html"
check "... before the run, naming the file" grep -q "cannot write '$T/no/such/dir/r.html'" "$ERR"
check "... and prints no report" test ! -s "$OUT"

# the line rate: on the CPU none; on a GPU the pinned copy measured after
# the run, by a process alone on its host
check "on the CPU no line rate is measured" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["pinned_copy_bytes_per_s"] == 0' "$T/r.json"
check "... nor printed" sh -c '! grep -q "line rate" "$1"' sh "$T/r.txt"
if "$DLK" bench-stream "$T/ds" --device cuda:0 --epochs 1 >/dev/null 2>"$T/gpu.err"; then
    ok "on a GPU, 2 epochs, with a report" dlk bench-stream "$T/ds" --device cuda:0 \
        --epochs 2 --report "$T/gpu.json"
    check "... the line rate: the GPU's pinned copy and the share the best epoch moved" \
        grep -qE "^  line rate: this GPU's pinned host-to-device copy [0-9.]+ GB/s \(measured after the run\); the best epoch after the first moved [0-9]+% of it" "$OUT"
    check "... in the JSON too, as the text has it (a link moves over 1 GB/s)" python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1])); t = open(sys.argv[2]).read()
link = d["pinned_copy_bytes_per_s"]
assert link > 1e9, link
m = re.search(r"copy ([0-9.]+) GB/s .* moved ([0-9]+)% of it", t)
assert abs(float(m.group(1)) - link / 1e9) < 0.01, (m.group(1), link)
assert abs(int(m.group(2)) - 100 * d["steady_bytes_per_s"] / link) <= 1, (m.group(2), d)' \
        "$T/gpu.json" "$OUT"
    ok "... and the page shows it" dlk bench-report "$T/gpu.html" "$T/gpu.json"
    check "... a row of the rank's table" grep -q "<th>line rate</th><td>pinned host-to-device copy" "$T/gpu.html"
    LOCAL_WORLD_SIZE=2 ok "one of two ranks of a host on a GPU" dlk bench-stream "$T/ds" \
        --device cuda:0 --rank 0 --world 2 --json
    check "... does not measure it: the other rank may still stream" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["pinned_copy_bytes_per_s"] == 0' "$OUT"
else
    skip "the line rate on a GPU" "no GPU here: $(tail -n 1 "$T/gpu.err")"
fi

# the per-file baseline beside dlk on the same axes
mkdir -p "$T/src"
check "a baseline source of 24 PNGs" python3 -c '
import sys
from PIL import Image
for i in range(24):
    Image.new("RGB", (32, 32), (i * 10, 80, 200 - i * 5)).save("%s/p%02d.png" % (sys.argv[1], i))' "$T/src"
ok "bench-stream --report with --source-baseline" dlk bench-stream "$T/ds" --device cpu \
    --batch-size 8 --source-baseline "$T/src" --baseline-seconds 30 --report "$T/b.html"
check "... draws the baseline on the rate chart and beside dlk" python3 -c '
import re, sys
p = open(sys.argv[1]).read()
rate = re.search(r"<svg[^>]*id=\"rate\".*?</svg>", p, re.S).group(0)
assert "class=\"base\"" in rate and "per-file baseline" in rate, "baseline line"
assert "id=\"baseline\"" in p and "dlk beside the per-file baseline" in p' "$T/b.html"
check "... still a valid page" python3 "$T/page.py" "$T/b.html" timeline,rate,baseline

# in a real browser: every chart's plot area is on the screen, with
# something drawn on it (each has its own background colour to find)
if ! command -v chromium >/dev/null 2>&1; then
    skip "the page renders in Chromium" "chromium missing (apt-get install chromium)"
    exit 0
fi
render() { # HTML PNG
    timeout 120 chromium --headless --no-sandbox --disable-gpu \
        --hide-scrollbars --user-data-dir="$T/chromium" --window-size=1040,5200 \
        --screenshot="$2" "file://$1" >/dev/null 2>&1
    test -s "$2"
}
cat >"$T/drawn.py" <<'EOF'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB"); w, h = im.size
bg = {"timeline": "#f4f6fb", "rate": "#f6f4fb", "split": "#f4fbf6", "stages": "#fbf6f4",
      "memory": "#f4fafb", "requests": "#fbf4f8", "bytes": "#f8fbf4", "baseline": "#f7f7f2"}
want = sys.argv[2].split(",")
rgb = {k: tuple(int(v[i:i + 2], 16) for i in (1, 3, 5)) for k, v in bg.items()}
data = im.load()
for k in want:
    # the plot area: the rows and columns with many pixels of its
    # background (a stray pixel of that colour elsewhere does not count)
    rows = [y for y in range(h) if sum(data[x, y] == rgb[k] for x in range(0, w, 4)) >= 20]
    assert len(rows) >= 10, "%s: plot area not on the page (%d rows)" % (k, len(rows))
    y0, y1 = rows[0], rows[-1]
    cols = [x for x in range(w) if sum(data[x, y] == rgb[k] for y in range(y0, y1 + 1, 2)) >= 3]
    x0, x1 = cols[0], cols[-1]
    n = sum(data[x, y] == rgb[k] for x in range(x0, x1 + 1) for y in range(y0, y1 + 1))
    area = (x1 - x0 + 1) * (y1 - y0 + 1)
    drawn = area - n                       # pixels of the area not background
    # data ink is coloured; the grid, ticks, labels and epoch lines are grey
    ink = sum(max(p) - min(p) > 40 for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)
              for p in [data[x, y]])
    assert x1 - x0 > 500 and ink > 500 and ink > 0.003 * area, \
        "%s: blank (%d of %d pixels drawn, %d coloured)" % (k, drawn, area, ink)
    print("%s %dx%d %.0f%% drawn, %d coloured pixels" % (k, x1 - x0 + 1, y1 - y0 + 1,
                                                        100.0 * drawn / area, ink))
EOF
check "Chromium renders the one-rank page" render "$T/r.html" "$T/r.png"
check "... every chart drawn" python3 "$T/drawn.py" "$T/r.png" timeline,rate,split,stages,memory,requests,bytes
check "Chromium renders the two-rank page" render "$T/all.html" "$T/all.png"
check "... every chart drawn" python3 "$T/drawn.py" "$T/all.png" timeline,rate,split,stages,memory,requests,bytes
check "Chromium renders the page with a baseline" render "$T/b.html" "$T/b.png"
check "... its comparison drawn" python3 "$T/drawn.py" "$T/b.png" rate,baseline
