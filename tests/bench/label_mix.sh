#!/usr/bin/env bash
# tests/bench/label_mix.sh [CLASSES] [PER] - how well the batches of a
# class-folder tree mix its classes: CLASSES folders of PER small JPEGs
# (default 10 x 2000 = 20,000 rows), ingested with the defaults from a
# directory and from S3 (s3_dir_server on loopback), against the same tree
# ingested --order sorted (the layout ingest wrote before rows were
# shuffled) in the same run; each streamed by bench-stream on 1, 2 and 4
# ranks, 3 epochs, batch 256, in dataset order and with --shuffle, and its
# label-mix ratio printed per rank (the worst epoch; 1.0 = a random
# permutation), with the first batch's seconds.  Chunks hold 111 samples
# in 16 parts, as 224x224x3 u8 images do in 16 MiB chunks of 1 MiB parts
# (--chunk-size 336K --part-size 21K for the 32x32 images here), so the
# windows span what they would on real data; the sorted dataset is also
# streamed --whole-chunks (a window of whole chunks).
#   DLK=build/dlk SRV=build/tests/s3_dir_server tests/bench/label_mix.sh
set -eu
C=${1:-10}
P=${2:-2000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DLK=${DLK:-$root/build/dlk}
SRV=${SRV:-$root/build/tests/s3_dir_server}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-mix.XXXXXX")
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$T"' EXIT
. "$root/tests/mixlib.sh" # mix_tree
mix_tree "$T/root/raw/train" "$C" "$P" 1 32
"$SRV" "$T/root" 16 > "$T/port" 2> "$T/srv.err" &
pid=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
port=$(awk '{print $2}' "$T/port")
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
opts="--resize 32x32 --chunk-size 336K --part-size 21K --quiet"
"$DLK" create "$T/dir" from-dir "$T/root/raw/train" $opts
"$DLK" create "$T/s3" from-s3 s3://raw/train $opts
"$DLK" create "$T/sorted" from-dir "$T/root/raw/train" --order sorted $opts
echo "machine: $(nproc) cores; $C classes x $P rows; $("$DLK" ls "$T/dir" --json | python3 -c '
import json, sys; t = json.load(sys.stdin)["tensors"]; i = [x for x in t if x["name"] == "images"][0]
print("%d chunks of images" % i["chunks"])')"
ranks_mix() { # DATASET WORLD FLAGS... -> "r0 r1 ... first-batch-s of rank 0"
    local ds=$1 w=$2 r out first="" line=""; shift 2
    for ((r = 0; r < w; r++)); do
        if ! out=$("$DLK" bench-stream "$ds" --device cpu --batch-size 256 --epochs 3 --rank $r --world $w "$@" --json 2>"$T/err"); then
            echo "bench-stream $ds rank $r of $w $* failed: $(grep -v warning "$T/err")" >&2
            exit 1
        fi
        line="$line $(echo "$out" | python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)["label_mix"]["ratio"])')"
        [ -n "$first" ] || first=$(echo "$out" | python3 -c 'import json, sys; print("%.3f" % json.load(sys.stdin)["first_batch_s"])')
    done
    echo "$line (first batch ${first} s)"
}
for ds in dir s3 sorted; do
    case $ds in
    dir) what="default, from a directory" ;;
    s3) what="default, from S3" ;;
    sorted) what="--order sorted (baseline)" ;;
    esac
    sets=("" "--shuffle")
    [ "$ds" != sorted ] || sets+=("--shuffle --whole-chunks")
    for flags in "${sets[@]}"; do
        for w in 1 2 4; do
            printf '%-28s %-10s %d rank(s): label mix per rank%s\n' "$what" "${flags:-in order}" "$w" "$(ranks_mix "$T/$ds" "$w" $flags)"
        done
    done
done
