#!/usr/bin/env bash
# t396-bench-baseline.sh - bench-stream --source-baseline: the per-file
# baseline reads every object of the source (one read and one decode a
# sample), counts the ones that cannot be decoded as errors, reports its
# rate and first full batch, and the ratio of the stream's rate to it; a
# source with no objects and bad --baseline-seconds are errors.  The cost
# of an epoch on S3: each epoch's requests and bytes priced with
# --s3-price, beside one GET of every source object.
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "bench-stream --source-baseline" "ffmpeg missing"; exit 0; }

S=$T/raw
mkdir -p "$S/a" "$S/b"
ff -f lavfi -i "testsrc2=s=96x72:r=10" -frames:v 6 -q:v 3 "$S/a/f%02d.jpg"
ff -f lavfi -i "mandelbrot=s=96x72:r=10" -frames:v 4 "$S/b/m%02d.png"
echo "not an image" > "$S/b/bad.jpg"
: > "$S/b/empty.jpg" # zero bytes: not an object to read

DS=$(ds_url ds)
ok "create from-dir (the text file skipped; 2 of 12 objects bad: --max-skip 1)" dlk create "$DS" from-dir "$S" --resize 32x24 --max-skip 1 --json
check "10 images ingested" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==10, d' "$OUT"

ok "bench-stream with a per-file baseline" dlk bench-stream "$DS" --device cpu --json \
    --batch-size 4 --workers 2 --source-baseline "$S" --baseline-seconds 60
cp "$OUT" "$T/b.json"
check "the baseline decoded the 10 images and counted the text file as an error" python3 -c '
import json,sys; b=json.load(open(sys.argv[1]))["baseline"]
assert b["source"]==sys.argv[2] and b["samples"]==10 and b["errors"]==1, b' "$T/b.json" "$S"
check "its rate is samples over seconds, its first full batch inside the run" python3 -c '
import json,sys; b=json.load(open(sys.argv[1]))["baseline"]
assert b["seconds"] > 0 and abs(b["samples_per_s"] - b["samples"] / b["seconds"]) <= 1e-6 * b["samples_per_s"] + 1e-9, b
assert 0 < b["first_batch_s"] <= b["seconds"], b' "$T/b.json"
check "ratio_to_baseline is the stream's rate over the baseline's" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); b=d["baseline"]
assert abs(d["ratio_to_baseline"] - d["samples_per_s"] / b["samples_per_s"]) <= 1e-6 * d["ratio_to_baseline"], d' "$T/b.json"
check "each epoch's requests, bytes and cost at the default prices" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); e=d["epochs"][-1]; c=d["epoch_cost"]
assert e["requests"] >= 1 and e["bytes_read"] > 0, e
assert abs(e["cost_usd"] - (e["requests"] / 1000 * 0.0004 + e["bytes_read"] / 1e9 * 0.09)) < 1e-12, e
assert (c["requests"], c["bytes_read"], c["usd"]) == (e["requests"], e["bytes_read"], e["cost_usd"]), c
assert (c["get_per_1000"], c["per_gb"]) == (0.0004, 0.09), c' "$T/b.json"
check "the per-file epoch: one GET of each of the 11 objects with bytes" python3 -c '
import json,os,sys; b=json.load(open(sys.argv[1]))["baseline"]["epoch_cost"]
size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(sys.argv[2]) for f in fs)
assert b["requests"] == 11 and b["bytes_read"] == size, (b, size)
assert abs(b["usd"] - (11 / 1000 * 0.0004 + size / 1e9 * 0.09)) < 1e-12, b' "$T/b.json" "$S"
ok "the baseline under the stream's step" dlk bench-stream "$DS" --device cpu --json \
    --batch-size 2 --workers 2 --step-ms 20 --source-baseline "$S"
check "... ran the step on each full batch and says how busy that kept the device" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); b=d["baseline"]
assert b["step_ms"] == 20 and b["samples"] == 10, b
# five batches of two, each with a 20 ms step: at least 0.1 s, mostly busy
assert b["seconds"] >= 0.1 and 30 < b["gpu_busy_pct"] <= 100, b' "$OUT"
ok "... side by side in the text report" dlk bench-stream "$DS" --device cpu --batch-size 2 --step-ms 5 --source-baseline "$S"
check "... one line with both" grep -q "consumer busy with a 5 ms step: dlk [0-9.]*%, per-file [0-9.]*% ([0-9]* against [0-9]* samples/s)" "$OUT"
ok "--s3-price 1,2 with --epochs 2" dlk bench-stream "$DS" --device cpu --epochs 2 --json --s3-price 1,2
check "... prices both epochs with it" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
for e in d["epochs"]:
    assert abs(e["cost_usd"] - (e["requests"] / 1000 + e["bytes_read"] / 1e9 * 2)) < 1e-12, e' "$OUT"
check "... and an epoch costs the run over its epochs, not the last epoch alone" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); c=d["epoch_cost"]; ep=d["epochs"]
reqs = sum(e["requests"] for e in ep); rd = sum(e["bytes_read"] for e in ep)
assert (c["requests"], c["bytes_read"]) == ((reqs + 1) // 2, (rd + 1) // 2), (c, ep)
assert abs(c["usd"] - (c["requests"] / 1000 + c["bytes_read"] / 1e9 * 2)) < 1e-12, c' "$OUT"
ok "... and the text report says what an epoch costs" dlk bench-stream "$DS" --device cpu --s3-price 1,2 --source-baseline "$S"
check "... for dlk and the per-file way" grep -q "an epoch on S3 at \$1 per 1000 GETs and \$2 per GB: .*; per-file \$0.011" "$OUT"
for bad in 1 -1,2 1,x 1,2,3 nan,1; do
    fails "--s3-price $bad is a usage error" 2 dlk bench-stream "$DS" --device cpu --s3-price "$bad"
    check "... naming it" grep -q -- "^dlk bench-stream: --s3-price: " "$ERR"
done
ok "the text report has the baseline line" dlk bench-stream "$DS" --device cpu \
    --batch-size 4 --source-baseline "$S"
check "... with its samples" grep -q "per-file baseline ($S): 10 samples" "$OUT"

mkdir -p "$T/none"
: > "$T/none/empty.jpg"
fails "a source with no objects is an error" 3 \
    dlk bench-stream "$DS" --device cpu --source-baseline "$T/none"
check "... naming the source" grep -q "no objects under '$T/none'" "$ERR"
for bad in 0 -1 nan 86401; do
    fails "--baseline-seconds $bad is a usage error" 2 \
        dlk bench-stream "$DS" --device cpu --source-baseline "$S" --baseline-seconds "$bad"
    check "... saying the range" grep -qE -- "--baseline-seconds: ('nan' is not a number|$bad is out of range \(above 0, at most 86400\))" "$ERR"
done
fails "--baseline-seconds 5x is a usage error" 2 \
    dlk bench-stream "$DS" --device cpu --source-baseline "$S" --baseline-seconds 5x
check "... naming the value" grep -q -- "--baseline-seconds: '5x' is not a number" "$ERR"
