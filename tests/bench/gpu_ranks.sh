#!/usr/bin/env bash
# tests/bench/gpu_ranks.sh [SAMPLES] [STEP_MS] - every GPU of one host
# streaming one dataset from the page cache, one process a GPU with the
# variables torchrun gives each (RANK, WORLD_SIZE, LOCAL_RANK,
# LOCAL_WORLD_SIZE), default flags, EPOCHS (default 3) epochs:
#   - aggregate samples/s and GB/s in steady epochs (the sum of each
#     rank's fastest after the first; and in one window of the host's
#     clock in which every rank is past its first epoch) and in the last,
#     against the host's
#     aggregate pinned host-to-device copy with one stream a GPU
#     (h2d_all_gpus) and against what the host's memory allows a loader
#     that copies out of the page cache on every GPU at once, each GPU
#     reading its own share of the files (host_path_all_gpus), both
#     measured in the same run;
#   - with a step of STEP_MS (default 13) a batch: each rank's GPU busy
#     over the whole run;
#   - each rank's device checksum against the CPU's, and each epoch's
#     rows over all ranks disjoint and complete (--order-out);
#   - each rank's peak RSS and loading threads.
# SAMPLES (default 20000) synthetic u8 224x224x3 samples in 16 MiB chunks.
# DLK (default dist/bin/dlk) names another build to run.  BIND=1 runs
# each rank (and its probe) on the cores of its GPU's NUMA node
# (taskset, the node's local_cpulist in sysfs), as a launcher that binds
# ranks would.  Each rank checks a part's checksum the first time it
# reads it, and the ranks' rows differ from epoch to epoch: with four
# ranks, three quarters of a rank's second epoch are parts it reads for
# the first time, and nine sixteenths of its third.  EPOCHS=8 shows
# the rate once a rank has checked (nearly) all.  ARGS adds bench-stream flags to every rank's run.
# KEEP=DIR writes the dataset to DIR/ds, or uses the one there, and
# leaves it (for further runs on the same data).
#   DIST=dist tests/bench/gpu_ranks.sh [SAMPLES] [STEP_MS]
set -u
n=${1:-20000}
step=${2:-13}
epochs=${EPOCHS:-3}
DIST=${DIST:-dist}
DLK=${DLK:-$DIST/bin/dlk}
G=${GPUS:-$(nvidia-smi -L | wc -l)}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-ranks.XXXXXX")
trap 'rm -rf "$T"' EXIT
if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    [ -d "$KEEP/ds" ] || "$DIST/bin/synth" "$KEEP/ds" "$n" 224 224 >/dev/null
    ln -s "$KEEP/ds" "$T/ds"
else
    "$DIST/bin/synth" "$T/ds" "$n" 224 224 >/dev/null
fi
cat $(find -L "$T/ds" -type f) >/dev/null
echo "host: $(nproc) cores, $G GPUs; $n samples"
# the cores nearest GPU $1 (its PCI device's local_cpulist), or all
gpu_cpus() {
    local id
    id=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i "$1" |
         tr 'A-F' 'a-f' | sed 's/^0000\(....:\)/\1/')
    cat "/sys/bus/pci/devices/$id/local_cpulist" 2>/dev/null || echo "0-$(( $(nproc) - 1 ))"
}
bind() { # RANK CMD... - CMD on that rank's cores when BIND=1 (RANK
    # "all": every core)
    local r=$1; shift
    if [ "${BIND:-0}" = 1 ] && [ "$r" != all ]; then taskset -c "$(gpu_cpus "$r")" "$@"; else "$@"; fi
}
for ((r = 0; r < G; r++)); do
    echo "GPU $r: cores $(gpu_cpus "$r")"
done
"$DIST/bin/h2d_all_gpus" 2 | tee "$T/h2d"
agg=$(sed -n 's/^pinned H2D, all .* at once: \([0-9.]*\) GB\/s.*/\1/p' "$T/h2d")
[ -n "$agg" ] || { echo "no pinned H2D figure (no GPU?)"; agg=0; }
# the probe of earlier runs, for comparison with them: host_path_probe
# (pread into pinned buffers, then copied to the GPU) in one process a
# GPU, all started together, each on its share of the cores, each
# reading every file and timed on its own: their sum counts processes
# that ran partly alone, and pages read by several at once
per=$(( $(nproc) / G )); pids=()
for ((r = 0; r < G; r++)); do
    CUDA_VISIBLE_DEVICES=$r bind "$r" "$DIST/bin/host_path_probe" "$per" 4 \
        $(find -L "$T/ds" -type f -size +1M) > "$T/probe.$r" &
    pids+=($!)
done
wait "${pids[@]}"
sep=$(cat "$T"/probe.* | sed -n 's/^pread into pinned + H2D.*: \([0-9.]*\) GB\/s/\1/p' |
      awk '{s += $1} END {printf "%.2f", s}')
echo "pread into pinned + H2D, one process a GPU started together, each reading every file and timed on its own, $per threads each: $sep GB/s summed"
# the same path in one process, every GPU's threads in the same window
# and each GPU reading its own share of the files, as the ranks read
# disjoint chunks: the figure the ranks are measured against
CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((G - 1))) bind all "$DIST/bin/host_path_all_gpus" "$per" 2 \
    $(find -L "$T/ds" -type f -size +1M | sort) | tee "$T/all"
path=$(sed -n 's/^pread into pinned + H2D, .* its own share of the files: \([0-9.]*\) GB\/s.*/\1/p' "$T/all")
[ -n "$path" ] || path=$sep
# the host's memory alone, from host_path_all_gpus's first phase (every
# thread copying 64 MiB buffers, all at once): a copied byte is read once
# and written once, and a page-cache loader's byte crosses host memory
# three times (read cached, write pinned, read by the DMA)
mem=$(sed -n 's/^memcpy, .*: \([0-9.]*\) GB\/s copied/\1/p' "$T/all")
echo "memcpy on all their threads at once: $mem GB/s copied = $(awk -v m="$mem" 'BEGIN {printf "%.1f", 2 * m}') GB/s through memory; at three crossings a byte a loader gets at most $(awk -v m="$mem" 'BEGIN {printf "%.1f", 2 * m / 3}') GB/s"
ranks() { # TAG ARGS... - one process a GPU, all at once
    local tag=$1 pids=() r; shift
    for ((r = 0; r < G; r++)); do
        RANK=$r WORLD_SIZE=$G LOCAL_RANK=$r LOCAL_WORLD_SIZE=$G \
            bind "$r" "$DLK" bench-stream "$T/ds" --epochs "$epochs" --json \
            --order-out "$T/$tag.order.$r" "$@" > "$T/$tag.$r.json" &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || echo "$tag: a rank failed"; done
    python3 - "$T" "$tag" "$G" "$n" "$agg" "${path:-0}" "$epochs" <<'PY'
import json, sys
T, tag, G, n, agg = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
path = float(sys.argv[6])
E = int(sys.argv[7])
ds = [json.load(open("%s/%s.%d.json" % (T, tag, r))) for r in range(G)]
steady = [max(e["bytes_per_s"] for e in d["epochs"][1:]) / 1e9 for d in ds]
sps = [max(e["samples_per_s"] for e in d["epochs"][1:]) for d in ds]
for r, d in enumerate(ds):
    ep = [e["bytes_per_s"] / 1e9 for e in d["epochs"]]
    print("  rank %d: epochs %s GB/s, steady %6.0f samples/s, first epoch %3.0f%% of steady, busy %5.1f%%, "
          "first batch %.3f s, checksum %s, peak RSS %.2f GB, %d threads"
          % (r, " ".join("%.2f" % x for x in ep), sps[r], 100 * ep[0] / steady[r], d["gpu_busy_pct"],
             d["first_batch_s"], "equal" if d["checksum_ok"] else "DIFFERENT", d["peak_rss_bytes"] / 1e9,
             d["io_threads"]))
print("  together: steady %.2f GB/s (%.0f samples/s) = %.1f%% of the pinned H2D of all GPUs at once (%.2f GB/s), "
      "%.1f%% of pread + H2D on all at once, own shares (%.2f GB/s); busy %s"
      % (sum(steady), sum(sps), 100 * sum(steady) / agg if agg else 0, agg,
         100 * sum(steady) / path if path else 0, path,
         " ".join("%.1f%%" % d["gpu_busy_pct"] for d in ds)))
# one window in which every rank is past its first epoch and still
# running (the host's monotonic clock: the timelines' start and their
# buckets' times): the ranks' samples in it, a bucket's counted pro rata
def window(d):
    tl = d["timeline"]; c = tl["columns"]
    if "start_monotonic_s" not in tl:  # a build before the field
        return None, None, None, None
    t0 = tl["start_monotonic_s"]
    rows = [dict(zip(c, r)) for r in tl["buckets"]]
    later = [r for r in rows if r["epoch"] >= 1]
    return (t0 + later[0]["t0"] if later else None), t0 + rows[-1]["t1"], t0, later
ws = [window(d) for d in ds]
if all(w[0] is not None for w in ws):
    a = max(w[0] for w in ws); b = min(w[1] for w in ws)
    if b > a:
        got = 0.0
        for (_, _, t0, later), d in zip(ws, ds):
            for r in later:
                s0, s1 = t0 + r["t0"], t0 + r["t1"]
                if s1 > s0:
                    got += r["samples"] * max(0.0, min(b, s1) - max(a, s0)) / (s1 - s0)
        per_sample = ds[0]["bytes_per_s"] / ds[0]["samples_per_s"] if ds[0]["samples_per_s"] else 0
        gbs = got * per_sample / (b - a) / 1e9
        print("  together, one window with every rank past its first epoch (%.0f ms): %.2f GB/s (%.0f samples/s) "
              "= %.1f%% of the pinned H2D, %.1f%% of pread + H2D"
              % (1e3 * (b - a), gbs, got / (b - a), 100 * gbs / agg if agg else 0,
                 100 * gbs / path if path else 0))
    else:
        print("  together, one window: none (a rank ended before another's second epoch began)")
last = sum(d["epochs"][-1]["bytes_per_s"] for d in ds) / 1e9
print("  together, the last epoch: %.2f GB/s = %.1f%% of the pinned H2D, %.1f%% of pread + H2D; chunks checked a rank: %s"
      % (last, 100 * last / agg if agg else 0, 100 * last / path if path else 0,
         " ".join(str(d.get("chunks_verified", "-")) for d in ds)))
# each epoch's rows over all ranks: disjoint and complete
orders = [[l.split() for l in open("%s/%s.order.%d" % (T, tag, r))] for r in range(G)]
ok = True
for e in range(E):
    rows = []
    for o in orders:
        per = len(o) // E
        for b in o[e * per:(e + 1) * per]:
            rows.extend(int(x) for x in b)
    if len(rows) != n or set(rows) != set(range(n)):
        ok = False
        print("  epoch %d: %d rows, %d distinct, of %d" % (e, len(rows), len(set(rows)), n))
print("  rows of every epoch over the ranks: %s" % ("disjoint and complete" if ok else "NOT a partition"))
PY
}
flags=${ARGS:+flags: $ARGS}
echo "== no step, ${flags:-default flags}"
ranks nostep ${ARGS:-}
echo "== step $step ms a batch, ${flags:-default flags}"
ranks step --step-ms "$step" ${ARGS:-}
