"""dlk.jax on the GPUs (TAP output): needs jax with CUDA, a CUDA build of
libdlk and a GPU.  Run by tests/python/test_dlk.py (t500) where those are
present, or by hand on any dataset:

    PYTHONPATH=DIR_OF_THE_INSTALLED_PACKAGE python3 tests/gpu/jax_cuda.py DATASET

Checks: each shard of a batch lies on its GPU with the rows of that
device's rank and the dataset's values (read on the cpu through the
library), and an epoch gives every row once; a jitted step over batches
held across many next() calls sees their values (the stream ordering
and the memory's lifetime); a loader over the first GPU only."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import dlk
import dlk.jax

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import tap  # noqa: E402
from tap import test  # noqa: E402

URL = sys.argv[1]
ds = dlk.open(URL)
fixed = [t["name"] for t in ds.tensors if None not in t["shape"]]
try:
    gpus = jax.devices("gpu")
except RuntimeError as e:
    print(f"# jax has no GPU backend: {e}")
    sys.exit(77)


@test
def _():
    """every shard on its GPU with its rank's rows and their values; every
    row once an epoch"""
    ld = dlk.jax.loader(URL, batch_size=8, seed=1, tensors=fixed,
                        devices=gpus)
    rows = []
    for b in ld:
        for name in fixed:
            x = b[name]
            assert x.sharding == ld.sharding
            for sh in x.addressable_shards:
                k = gpus.index(sh.device)
                # (one device holds the whole batch: slice(None))
                assert sh.index[0].indices(x.shape[0])[:2] == (8 * k, 8 * k + 8), \
                    (k, sh.index)
                got = np.asarray(sh.data)
                for j, row in enumerate(b.index[8 * k:8 * k + 8]):
                    assert (got[j] == ds.read(name, int(row))).all(), (name, row)
        rows += [int(r) for r, p in zip(b.index, b.pad) if not p]
    assert sorted(rows) == list(range(len(ds))), len(rows)


@test
def _():
    """a jitted step over batches held across next() sees their values"""
    name = fixed[0]
    step = jax.jit(lambda x: jnp.sum(x.astype(jnp.float64)
                                     if jax.config.jax_enable_x64
                                     else x.astype(jnp.float32)))
    ld = dlk.jax.loader(URL, batch_size=4, seed=2, tensors=[name],
                        devices=gpus)
    held = [(b.index.copy(), b[name]) for b in ld]
    sums = [step(x) for _, x in held]
    for (idx, _), s in zip(held, sums):
        want = sum(np.asarray(ds.read(name, int(r)), np.float64).sum()
                   for r in idx)
        assert abs(float(s) - want) <= 1e-6 * max(1.0, abs(want)), (float(s), want)


@test
def _():
    """over the first GPU alone: one rank, the whole dataset"""
    ld = dlk.jax.loader(URL, batch_size=16, seed=3, tensors=fixed,
                        devices=gpus[:1])
    assert ld.local_devices == gpus[:1]
    n = sum(int((~b.pad).sum()) for b in ld)
    assert n == len(ds), n


sys.exit(1 if tap.failed else 0)
