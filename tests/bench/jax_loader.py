"""dlk.jax against dlk.Loader + jax.dlpack.from_dlpack, one jitted step
over each, in one run: what the sharded batches cost a JAX loop.

    python3 tests/bench/jax_loader.py DATASET [--repeats 2] [--epochs 3]
        [--batch-size 256]

DATASET: images (u8, fixed shape) and labels, as tests/bench/synth
writes.  Each repeat runs dlk.jax.loader over jax.devices() (batch-size
rows a device, sharded over them), then dlk.Loader on the first device
with its tensors taken by jax.dlpack.from_dlpack: the same jitted step
(a sum over a pixel of each image and the labels) on every batch.  The
steady rate is the best epoch after the first (the clock read after the
device finished the epoch); the ratio sets dlk.jax's rate a device
beside the plain loader's on one device (the target: 90% or more)."""
import argparse
import json
import time

import jax
import jax.numpy as jnp

import dlk
import dlk.jax

ap = argparse.ArgumentParser()
ap.add_argument("dataset")
ap.add_argument("--repeats", type=int, default=2)
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--batch-size", type=int, default=256)
a = ap.parse_args()


@jax.jit
def step(acc, x, y):
    return acc + jnp.sum(x[:, 0, 0, 0].astype(jnp.float32)) + \
        jnp.sum(y.astype(jnp.float32))


def run(loader, take):
    rates = []
    for _ in range(a.epochs):
        t0, n, acc = time.perf_counter(), 0, jnp.zeros(())
        for b in loader:
            x, y = take(b)
            acc = step(acc, x, y)
            n += x.shape[0]
        acc.block_until_ready()
        rates.append(n / (time.perf_counter() - t0))
    loader.close()
    return rates


devs = jax.devices()
tensors = ["images", "labels"]
print(json.dumps({"jax": jax.__version__, "devices": [str(d) for d in devs]}))
for r in range(a.repeats):
    sharded = run(dlk.jax.loader(a.dataset, batch_size=a.batch_size,
                                 epochs=a.epochs, tensors=tensors),
                  lambda b: (b["images"], b["labels"]))
    dev = dlk.jax._dlk_device(devs[0])
    plain = run(dlk.Loader(a.dataset, batch_size=a.batch_size,
                           epochs=a.epochs, tensors=tensors, device=dev),
                lambda b: (jax.dlpack.from_dlpack(b["images"]),
                           jax.dlpack.from_dlpack(b["labels"])))
    s, p = max(sharded[1:]), max(plain[1:])
    print(json.dumps({
        "repeat": r + 1,
        "dlk.jax": {"devices": len(devs), "epochs": [round(x) for x in sharded],
                    "steady": round(s), "steady_per_device": round(s / len(devs))},
        "dlk.Loader+from_dlpack": {"device": dev,
                                   "epochs": [round(x) for x in plain],
                                   "steady": round(p)},
        "ratio_per_device": round(s / len(devs) / p, 3)}))
