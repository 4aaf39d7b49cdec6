#!/usr/bin/env python3
"""Stream a dlk dataset into JAX: each batch's tensors go to
jax.dlpack.from_dlpack without a copy (on the GPU when JAX has one, else
on the cpu), and a jitted step consumes them.

    python3 examples/jax_stream.py DATASET [--epochs 2] [--batch-size 256]

The step here is a per-class mean image (a stand-in for a model).
Variable-shape tensors come as a list of per-sample tensors; this example
takes the fixed-shape ones.

TensorFlow takes the same objects:
    import tensorflow as tf
    x = tf.experimental.dlpack.from_dlpack(batch["images"].__dlpack__())
"""
import argparse
import time

import jax
import jax.numpy as jnp

import dlk


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--images", default="images")
    ap.add_argument("--labels", default="labels")
    a = ap.parse_args()

    gpu = jax.default_backend() == "gpu"
    ds = dlk.open(a.dataset)
    info = {t["name"]: t for t in ds.tensors}
    classes = max(len(info[a.labels]["classes"]), 1)
    loader = dlk.Loader(ds, batch_size=a.batch_size, shuffle=True,
                        tensors=[a.images, a.labels],
                        device="cuda" if gpu else "cpu", epochs=a.epochs,
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
          f"{jax.default_backend()}")
    for epoch in range(a.epochs):
        t0, n = time.perf_counter(), 0
        for batch in loader:
            images = jax.dlpack.from_dlpack(batch[a.images])
            labels = jax.dlpack.from_dlpack(batch[a.labels])
            acc, count = step(acc, count, images, labels)
            n += len(batch.index)
        acc.block_until_ready()
        dt = time.perf_counter() - t0
        print(f"epoch {epoch}: {n / dt:.0f} samples/s", flush=True)
    means = acc / jnp.maximum(count, 1)[:, None]
    print("per-class mean pixel:", [round(float(m), 1) for m in means.mean(1)])


if __name__ == "__main__":
    main()
