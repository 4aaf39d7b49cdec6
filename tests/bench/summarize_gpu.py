#!/usr/bin/env python3
"""Summarize gpu_stream.sh's results.jsonl: a table with the ratios the
issue asks for, printed and written as Markdown next to the JSON."""
import json, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
ls = json.load(open(sys.argv[2]))
gpu = open(sys.argv[3]).read().strip()
h2d = next(r for r in rows if "h2d_best_GBps" in r)
dl = [r for r in rows if "samples_per_s" in r and "dataset" in r]
jpeg = next((r for r in rows if r.get("baseline") == "jpeg"), None)
npy = next((r for r in rows if r.get("baseline") == "npy"), None)
big, big_checked, big_step, img, zstd = dl[:5]
t = {x["name"]: x for x in ls["tensors"]}["images"]
ratio = t["raw_bytes"] / t["stored_bytes"]
out = []
p = out.append
p(f"GPU: {gpu}")
p(f"pinned H2D (PyTorch, best of 16/64/256 MiB): {h2d['h2d_best_GBps']:.1f} GB/s")
p("")
p("| run | samples/s | GB/s | GPU busy % | stall % | first batch s | bottleneck |")
p("|---|---|---|---|---|---|---|")
for name, r in [("dlk big, line rate", big), ("dlk big, all checks", big_checked),
                ("dlk big, step 1.2x transfer", big_step), ("dlk images (decoded)", img),
                ("dlk images zstd", zstd)]:
    p(f"| {name} | {r['samples_per_s']:.0f} | {r['bytes_per_s']/1e9:.2f} | "
      f"{r['gpu_busy_pct']:.1f} | {r['stall_pct']:.1f} | {r['first_batch_s']:.3f} | {r['bottleneck']} |")
for name, r in [("PyTorch DataLoader + Pillow (JPEG)", jpeg), ("PyTorch DataLoader, .npy memmap", npy)]:
    if r:
        p(f"| {name} | {r['samples_per_s']:.0f} | {r['samples_per_s']*150528/1e9:.2f} | | | {r['first_batch_s']:.3f} | |")
p("")
p(f"line rate: {big['bytes_per_s']/1e9:.1f} GB/s = {big['bytes_per_s']/1e9/h2d['h2d_best_GBps']*100:.0f}% of pinned H2D (target >= 90%)")
p(f"busy with step: {big_step['gpu_busy_pct']:.1f}% (target >= 95%)")
if jpeg:
    p(f"dlk images / JPEG+Pillow: {img['samples_per_s']/jpeg['samples_per_s']:.1f}x (target >= 50x)")
if npy:
    p(f"dlk images / npy memmap: {img['samples_per_s']/npy['samples_per_s']:.1f}x (target >= 10x)")
p(f"zstd: {zstd['samples_per_s']:.0f} samples/s, compression ratio {ratio:.2f}, bottleneck {zstd['bottleneck']}")
p(f"checksums (all-checks run): {big_checked.get('checksum_ok')}")
print("\n".join(out))
open(sys.argv[1].replace(".jsonl", ".md"), "w").write("\n".join(out) + "\n")
