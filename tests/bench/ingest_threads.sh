#!/usr/bin/env bash
# tests/bench/ingest_threads.sh N [ARGS...] - what each kind of ingest
# thread does while rows flow: N Pillow JPEGs ingested (224x224) into
# /dev/shm, and every 10 ms the threads of the process read from
# /proc (named dlk-fetch, dlk-decode, dlk-write; the appender is the main
# thread): CPU seconds per kind and how many were running (R) or waiting
# (S) at each look, and in which kernel function the waiting ones were
# (wchan: a futex is a lock or condition variable; an rwsem or page
# fault names the address-space lock).  DIST=dist for a `make dist` tree.
set -eu
N=${1:-16000}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
DLK=${DLK:-${DIST:+$DIST/bin/dlk}}
DLK=${DLK:-$here/../../build/dlk}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-threads.XXXXXX")
S=/dev/shm/dlk-threads-$$
trap 'rm -rf "$T" "$S"' EXIT
python3 "$here/make_images.py" "$T/gen" --n "$N" --jpeg-only
"$DLK" create "$S" from-dir "$T/gen/jpeg" --resize 224x224 "$@" --json > "$T/out.json" &
pid=$!
python3 - "$pid" <<'PY'
import collections, os, sys, time
pid = sys.argv[1]
hz = os.sysconf("SC_CLK_TCK")
cpu = collections.Counter(); states = collections.defaultdict(collections.Counter)
wchan = collections.defaultdict(collections.Counter)
looks = 0
while True:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        break
    seen = False
    for t in tids:
        try:
            name = open(f"/proc/{pid}/task/{t}/comm").read().strip()
            f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        seen = True
        kind = name if name.startswith("dlk-") else "main (appender)"
        cpu[kind, t] = (int(f[11]) + int(f[12])) / hz
        states[kind][f[0]] += 1
        if f[0] != "R":
            try:
                wchan[kind][open(f"/proc/{pid}/task/{t}/wchan").read().strip() or "?"] += 1
            except OSError:
                pass
    looks += seen
    time.sleep(0.01)
tot = collections.Counter()
for (k, _), v in cpu.items():
    tot[k] += v
for k in sorted(tot):
    st = states[k]
    n = sum(st.values()) / max(looks, 1)
    print("%-16s %5.1f threads  cpu %6.2f s   running %4.1f%%  waiting %4.1f%%" % (
        k, n, tot[k], 100 * st["R"] / max(sum(st.values()), 1), 100 * st["S"] / max(sum(st.values()), 1)))
    w = wchan[k]
    if w:
        print("%-16s waiting in: %s" % ("", ", ".join("%s %.0f%%" % (c, 100 * v / sum(w.values())) for c, v in w.most_common(4))))
PY
wait "$pid"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f files/s" % (d["ingested"]/d["seconds"]), d["stages"])' "$T/out.json"
