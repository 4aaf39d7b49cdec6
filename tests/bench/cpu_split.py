#!/usr/bin/env python3
# tests/bench/cpu_split.py CMD...: run CMD (its stdout discarded), sample
# /proc/PID/task/*/stat every 20 ms and print the CPU seconds of each
# thread name (utime+stime, as last seen) and the wall time: where a
# multi-threaded command spends its CPU (dlk names its threads).
import os, subprocess, sys, time, collections
tck = os.sysconf('SC_CLK_TCK')
t0 = time.time()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
last = {}
while p.poll() is None:
    try:
        for tid in os.listdir(f'/proc/{p.pid}/task'):
            try:
                s = open(f'/proc/{p.pid}/task/{tid}/stat').read()
            except OSError:
                continue
            name = s[s.index('(')+1:s.rindex(')')]
            f = s[s.rindex(')')+2:].split()
            last[tid] = (name, (int(f[11]) + int(f[12])) / tck)
    except OSError:
        pass
    time.sleep(0.02)
wall = time.time() - t0
by = collections.defaultdict(float); n = collections.Counter()
for name, cpu in last.values():
    by[name] += cpu; n[name] += 1
tot = sum(by.values())
print("wall %.2f s, cpu %.2f s: " % (wall, tot) + ", ".join("%s x%d %.2f s (%.0f%%)" % (k, n[k], v, 100*v/tot) for k, v in sorted(by.items(), key=lambda kv: -kv[1])))
