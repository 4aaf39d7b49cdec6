#!/usr/bin/env python3
"""Summarize gpu_stream.sh's results.jsonl: a table of the ratios to
its baselines, printed and written as Markdown next to the JSON."""
import json, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
ls = json.load(open(sys.argv[2]))
gpu = open(sys.argv[3]).read().strip()
h2d = next(r for r in rows if "h2d_best_GBps" in r)
dl = [r for r in rows if "samples_per_s" in r and "dataset" in r]
jpeg = next((r for r in rows if r.get("baseline") == "jpeg"), None)
npy = next((r for r in rows if r.get("baseline") == "npy"), None)
big, big_checked, big_step, img, zstd = dl[:5]
big_default = dl[5] if len(dl) > 5 else None
img_long = dl[6] if len(dl) > 6 else None
t = {x["name"]: x for x in ls["tensors"]}["images"]
ratio = t["raw_bytes"] / t["stored_bytes"]
out = []
p = out.append
p(f"GPU: {gpu}")
p(f"pinned H2D (PyTorch, best of 16/64/256 MiB): {h2d['h2d_best_GBps']:.1f} GB/s")
p("")
def steady(r):
    """The best epoch after the first (the first also maps and pins)."""
    eps = r["epochs"][1:] or r["epochs"]
    return max(eps, key=lambda e: e["bytes_per_s"])


p("| run | epochs | first epoch GB/s | steady samples/s | steady GB/s | steady GPU busy % | first batch s | peak RSS GB | bottleneck |")
p("|---|---|---|---|---|---|---|---|---|")
for name, r in [("dlk big, line rate (--pin-cache auto)", big), ("dlk big, all checks (--pin-cache auto)", big_checked),
                ("dlk big, step 1.2x transfer (--pin-cache auto)", big_step), ("dlk images (decoded)", img),
                ("dlk images zstd", zstd), ("dlk big, default (read into pinned buffers)", big_default),
                ("dlk images (decoded), longer run", img_long)]:
    if not r:
        continue
    s = steady(r)
    p(f"| {name} | {len(r['epochs'])} | {r['epochs'][0]['bytes_per_s']/1e9:.2f} | {s['samples_per_s']:.0f} | "
      f"{s['bytes_per_s']/1e9:.2f} | {s['busy_pct']:.1f} | {r['first_batch_s']:.3f} | {r['peak_rss_bytes']/1e9:.2f} | {r['bottleneck']} |")
for name, r in [("PyTorch DataLoader + Pillow (JPEG)", jpeg), ("PyTorch DataLoader, .npy memmap", npy)]:
    if r:
        p(f"| {name} | | | {r['samples_per_s']:.0f} | {r['samples_per_s']*150528/1e9:.2f} | | {r['first_batch_s']:.3f} | |")
p("")
lr = steady(big)["bytes_per_s"] / 1e9
p(f"line rate (steady epoch): {lr:.1f} GB/s = {lr/h2d['h2d_best_GBps']*100:.0f}% of pinned H2D (target >= 90%); "
  f"whole run incl. first epoch {big['bytes_per_s']/1e9:.1f} GB/s")
if big_default:
    d = steady(big_default)["bytes_per_s"] / 1e9
    p(f"default (no page cache pinned): {d:.1f} GB/s = {d/h2d['h2d_best_GBps']*100:.0f}% of pinned H2D, "
      f"peak RSS {big_default['peak_rss_bytes']/1e9:.2f} GB (pinned: {big['peak_rss_bytes']/1e9:.2f} GB)")
p(f"GPU busy with a step of 1.2x the transfer time (steady epoch): {steady(big_step)['busy_pct']:.1f}% (target >= 95%)")
si = steady(img)["samples_per_s"]
if jpeg:
    p(f"dlk images / JPEG+Pillow: {si/jpeg['samples_per_s']:.1f}x steady, {img['samples_per_s']/jpeg['samples_per_s']:.1f}x whole run (target >= 50x)")
if npy:
    p(f"dlk images / npy memmap: {si/npy['samples_per_s']:.1f}x steady, {img['samples_per_s']/npy['samples_per_s']:.1f}x whole run (target >= 10x)")
if img_long and jpeg and npy:
    p(f"longer run ({len(img_long['epochs'])} epochs, {img_long['seconds']:.1f} s): whole run {img_long['samples_per_s']:.0f} samples/s = "
      f"{img_long['samples_per_s']/jpeg['samples_per_s']:.1f}x JPEG+Pillow, {img_long['samples_per_s']/npy['samples_per_s']:.1f}x npy memmap")
p(f"zstd: {steady(zstd)['samples_per_s']:.0f} samples/s steady (16 cores), compression ratio {ratio:.2f}, bottleneck {zstd['bottleneck']}")
p(f"checksums (all-checks run): {big_checked.get('checksum_ok')}")
print("\n".join(out))
open(sys.argv[1].replace(".jsonl", ".md"), "w").write("\n".join(out) + "\n")
