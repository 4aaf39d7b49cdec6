#!/usr/bin/env python3
"""Stream a dlk dataset into TensorFlow: each batch's tensors go to
tf.experimental.dlpack.from_dlpack without a copy (on the GPU when
TensorFlow has one, else on the cpu), and a tf.function step consumes
them.

    python3 examples/tf_stream.py DATASET [--epochs 2] [--batch-size 256]

The step here is a per-class sum and count of the images (a stand-in for
a model); the script prints each class's mean pixel.  Variable-shape
tensors come as a list of per-sample tensors; this example takes the
fixed-shape ones.  A batch's memory stays the loader's until the next
one: keep a tf.identity of a tensor to hold it longer.
"""
import argparse
import time

import tensorflow as tf

import dlk


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--images", default="images")
    ap.add_argument("--labels", default="labels")
    a = ap.parse_args()

    gpu = bool(tf.config.list_physical_devices("GPU"))
    ds = dlk.open(a.dataset)
    info = {t["name"]: t for t in ds.tensors}
    classes = max(len(info[a.labels]["classes"]), 1)
    loader = dlk.Loader(ds, batch_size=a.batch_size, shuffle=True,
                        tensors=[a.images, a.labels],
                        device="cuda" if gpu else "cpu", epochs=a.epochs,
                        drop_last=True)
    pixels = 1
    for d in info[a.images]["shape"]:
        pixels *= d

    @tf.function
    def step(acc, count, images, labels):
        onehot = tf.one_hot(tf.reshape(tf.cast(labels, tf.int32), [-1]),
                            classes, dtype=tf.float32)
        flat = tf.cast(tf.reshape(images, [tf.shape(images)[0], -1]),
                       tf.float32)
        return (acc + tf.matmul(onehot, flat, transpose_a=True),
                count + tf.reduce_sum(onehot, 0))

    acc = tf.zeros((classes, pixels), tf.float32)
    count = tf.zeros((classes,), tf.float32)
    print(f"{len(ds)} rows, {len(loader)} batches per epoch, TensorFlow on "
          f"{'gpu' if gpu else 'cpu'}")
    for epoch in range(a.epochs):
        t0, n = time.perf_counter(), 0
        for batch in loader:
            images = tf.experimental.dlpack.from_dlpack(
                batch[a.images].__dlpack__())
            labels = tf.experimental.dlpack.from_dlpack(
                batch[a.labels].__dlpack__())
            acc, count = step(acc, count, images, labels)
            n += len(batch.index)
        dt = time.perf_counter() - t0
        print(f"epoch {epoch}: {n / dt:.0f} samples/s", flush=True)
    means = acc / tf.maximum(count, 1)[:, None]
    print("per-class mean pixel:",
          [round(float(m), 1) for m in tf.reduce_mean(means, 1).numpy()])


if __name__ == "__main__":
    main()
