#!/usr/bin/env python3
"""Stream a dlk dataset into JAX over every device of the host: each batch
is a jax.Array sharded along its first axis over jax.devices() (dlk.jax:
one loader a device, each device's rows copied to it and taken through
DLPack without a copy), and a jitted step consumes it where the shards
are.  On one GPU, or on the cpu, the same code runs on that device.

    python3 examples/jax_stream.py DATASET [--epochs 2] [--batch-size 256]

--batch-size is the rows a device; a batch has that many times the
devices.  The step here is a per-class mean image (a stand-in for a
model) over two tensors; a batch holds only tensors of a fixed shape.

TensorFlow takes dlk.Loader's batches as they are:
    import tensorflow as tf
    x = tf.experimental.dlpack.from_dlpack(batch["images"].__dlpack__())
"""
import argparse
import time

import jax
import jax.numpy as jnp

import dlk
import dlk.jax


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--images", default="images")
    ap.add_argument("--labels", default="labels")
    a = ap.parse_args()

    ds = dlk.open(a.dataset)
    info = {t["name"]: t for t in ds.tensors}
    classes = max(len(info[a.labels]["classes"]), 1)
    loader = dlk.jax.loader(ds, batch_size=a.batch_size, shuffle=True,
                            tensors=[a.images, a.labels], epochs=a.epochs,
                            drop_last=True)

    @jax.jit
    def step(acc, count, images, labels):
        onehot = jax.nn.one_hot(labels.reshape(-1), classes, dtype=jnp.float32)
        flat = images.reshape(images.shape[0], -1).astype(jnp.float32)
        return acc + onehot.T @ flat, count + onehot.sum(0)

    shape = info[a.images]["shape"]
    acc = jnp.zeros((classes, int(jnp.prod(jnp.array(shape)))), jnp.float32)
    count = jnp.zeros((classes,), jnp.float32)
    print(f"{len(ds)} rows, {len(loader)} batches per epoch, JAX on "
          f"{len(loader.devices)} {jax.default_backend()} device(s)")
    for epoch in range(a.epochs):
        t0, n = time.perf_counter(), 0
        for batch in loader:
            acc, count = step(acc, count, batch[a.images], batch[a.labels])
            n += len(batch.index)
        acc.block_until_ready()
        dt = time.perf_counter() - t0
        print(f"epoch {epoch}: {n / dt:.0f} samples/s", flush=True)
    means = acc / jnp.maximum(count, 1)[:, None]
    print("per-class mean pixel:", [round(float(m), 1) for m in means.mean(1)])


if __name__ == "__main__":
    main()
