"""dlk.jax against dlk.Loader + jax.dlpack.from_dlpack, one jitted step
over each, in one run: what the sharded batches cost a JAX loop.

    python3 tests/bench/jax_loader.py DATASET [--repeats 2] [--epochs 3]
        [--batch-size 256] [--pin-cache auto]

DATASET: images (u8, fixed shape) and labels, as tests/bench/synth
writes.  Each repeat runs dlk.jax.loader over jax.devices() (batch-size
rows a device, sharded over them), then dlk.Loader on the first device
with its tensors taken by jax.dlpack.from_dlpack: the same jitted step
(a sum over a pixel of each image and the labels) on every batch.  The
steady rate is the best epoch after the first (the clock read after the
device finished the epoch; JAX started and the step compiled before the
first); the ratio sets dlk.jax's rate a device beside the plain loader's
on one device (the target: 90% or more).  Over several GPUs the host's
memory is shared by them all (compare the sum with
tests/bench/gpu_ranks.sh, one process a GPU, on the same host).  --pin-cache passes pin_cache to both loaders: dlk.jax's loaders
then read the chunks pinned once for all the GPUs of the process."""
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
ap.add_argument("--pin-cache", default=None)
a = ap.parse_args()
pin = {"pin_cache": a.pin_cache} if a.pin_cache else {}


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
    st = loader.stats()
    loader.close()
    st = st if isinstance(st, list) else [st]
    # per loader: the chunks it pinned, and those it read pinned by another
    return rates, {"chunks_pinned": [x["chunks_pinned"] for x in st],
                   "chunks_shared": [x["chunks_shared"] for x in st]}


devs = jax.devices()
tensors = ["images", "labels"]
print(json.dumps({"jax": jax.__version__, "devices": [str(d) for d in devs],
                  "pin_cache": a.pin_cache}))
# JAX's start (its GPU contexts, the memory it takes ahead, compiling the
# step for sharded and single-device batches) is paid once, outside the
# timed epochs: otherwise the first loader's first epoch carries it
for ld, take in ((dlk.jax.loader(a.dataset, batch_size=a.batch_size,
                                 tensors=tensors),
                  lambda b: (b["images"], b["labels"])),
                 (dlk.Loader(a.dataset, batch_size=a.batch_size,
                             tensors=tensors,
                             device=dlk.jax._dlk_device(devs[0])),
                  lambda b: (jax.dlpack.from_dlpack(b["images"]),
                             jax.dlpack.from_dlpack(b["labels"])))):
    x, y = take(next(iter(ld)))
    step(jnp.zeros(()), x, y).block_until_ready()
    ld.close()
for r in range(a.repeats):
    sharded, sst = run(dlk.jax.loader(a.dataset, batch_size=a.batch_size,
                                      epochs=a.epochs, tensors=tensors, **pin),
                       lambda b: (b["images"], b["labels"]))
    dev = dlk.jax._dlk_device(devs[0])
    plain, pst = run(dlk.Loader(a.dataset, batch_size=a.batch_size,
                                epochs=a.epochs, tensors=tensors, device=dev,
                                **pin),
                     lambda b: (jax.dlpack.from_dlpack(b["images"]),
                                jax.dlpack.from_dlpack(b["labels"])))
    s, p = max(sharded[1:]), max(plain[1:])
    print(json.dumps({
        "repeat": r + 1,
        "dlk.jax": {"devices": len(devs), "epochs": [round(x) for x in sharded],
                    "steady": round(s), "steady_per_device": round(s / len(devs)),
                    **sst},
        "dlk.Loader+from_dlpack": {"device": dev,
                                   "epochs": [round(x) for x in plain],
                                   "steady": round(p), **pst},
        "ratio_per_device": round(s / len(devs) / p, 3)}))
