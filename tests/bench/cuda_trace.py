#!/usr/bin/env python3
"""Read a DLK_CUDA_TRACE file (lines "kind host_issued gpu_start gpu_end",
seconds from one origin) and say where the compute stream was idle in
the last part of the run, and what it was waiting for:

  host   the gather was queued by the host after the previous step ended
         (the consumer thread was late);
  copy   a chunk copy ended right where the gather started (the copy was
         late): split by whether the copy itself was queued late (issue)
         or queued in time but behind other copies (queue);

and, over the same part, how long the host's loads took and how many
loading threads they kept busy (the trace's load lines).

    cuda_trace.py TRACE [FROM_FRACTION]
"""
import sys

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
frm = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
ev = [(k, float(a), float(b), float(c)) for k, a, b, c in rows]
gathers = sorted((e for e in ev if e[0] == "gather"), key=lambda e: e[2])
steps = sorted((e for e in ev if e[0] == "step"), key=lambda e: e[2])
copies = sorted((e for e in ev if e[0] == "copy"), key=lambda e: e[3])
budget = [e for e in ev if e[0] == "budget"]
if not gathers or not steps:
    sys.exit("no gathers or steps in the trace")
end = steps[-1][3]
t_from = gathers[0][2] + frm * (end - gathers[0][2])
gs = [g for g in gathers if g[2] >= t_from]
ss = [s for s in steps if s[2] >= t_from]
span = ss[-1][3] - gs[0][2]
busy = sum(g[3] - g[2] for g in gs) + sum(s[3] - s[2] for s in ss)
# pair each gather with the step that ended last before it
idle = {"host": 0.0, "copy-issue": 0.0, "copy-queue": 0.0, "other": 0.0}
count = dict.fromkeys(idle, 0)
prev_end = None
j = 0
for g in gs:
    while j < len(steps) and steps[j][3] <= g[2] + 1e-7:
        prev_end = steps[j][3]
        j += 1
    if prev_end is None:
        continue
    gap = g[2] - prev_end
    if gap <= 2e-6:
        continue
    if g[1] > prev_end:
        kind = "host"
    else:
        # the copy that ended closest before the gather started
        c = None
        for x in copies:
            if x[3] <= g[2] + 1e-6 and x[3] > prev_end - 1e-6:
                c = x
        if c is None:
            kind = "other"
        elif c[1] > prev_end - (c[3] - c[2]):
            kind = "copy-issue"
        else:
            kind = "copy-queue"
    idle[kind] += gap
    count[kind] += 1
cbusy = sum(c[3] - c[2] for c in copies if c[2] >= t_from)
nb = len(gs)
print("last %.0f%% of the run: %d batches in %.4f s (%.3f ms each); compute "
      "busy %.1f%%, copy engine busy %.1f%%"
      % (100 * (1 - frm), nb, span, 1e3 * span / max(nb, 1),
         100 * busy / span, 100 * cbusy / span))
for k in idle:
    print("  idle waiting for %-10s %7.4f s (%.1f%%) in %d gaps"
          % (k, idle[k], 100 * idle[k] / span, count[k]))
lag = [c[2] - c[1] for c in copies if c[2] >= t_from]
ahead = [g[2] - g[1] for g in gs]
if lag:
    lag.sort()
    print("  copy queued->started: median %.3f ms, p90 %.3f ms"
          % (1e3 * lag[len(lag) // 2], 1e3 * lag[int(len(lag) * .9)]))
ahead.sort()
print("  gather queued->started: median %.3f ms, p10 %.3f ms"
      % (1e3 * ahead[len(ahead) // 2], 1e3 * ahead[len(ahead) // 10]))
big = []
ends = sorted(e[3] for e in gathers + steps)
starts = sorted((e[2], e[1]) for e in gathers + steps)
prev = None
k = 0
for st, issued in starts:
    while k < len(ends) and ends[k] <= st + 1e-7:
        prev = ends[k]
        k += 1
    if prev is not None and prev >= t_from and st - prev > 1e-3:
        big.append((st - prev, prev, issued))
print("  gaps over 1 ms: %s" % ", ".join(
    "%.1f ms at %.3f s%s" % (1e3 * g, t, " (queued late)" if q > t else "")
    for g, t, q in big) if big else "  no gap over 1 ms")
loads = [e for e in ev if e[0] == "load" and e[3] >= t_from]
if loads:
    lt = sorted(e[3] - e[1] for e in loads)
    print("  loads (host): %d, median %.3f ms, p90 %.3f ms; %.1f loading "
          "threads busy on average, %.3f ms waiting for host buffers"
          % (len(lt), 1e3 * lt[len(lt) // 2], 1e3 * lt[int(len(lt) * .9)],
             sum(lt) / span, 1e3 * sum(e[2] - e[1] for e in loads)))
bw = sum(b[3] - b[2] for b in budget if b[2] >= t_from)
print("  uploader waiting for device budget: %.4f s in %d waits"
      % (bw, sum(1 for b in budget if b[2] >= t_from)))
for kind, what in (("pin", "pinned host buffers made"),
                   ("devalloc", "device buffers made")):
    ms = [e for e in ev if e[0] == kind]
    if ms:
        print("  %s: %d taking %.4f s in all, the last ending at %.4f s"
              % (what, len(ms), sum(e[3] - e[1] for e in ms), max(e[3] for e in ms)))
