"""dlk.torch on a GPU (TAP output): needs torch with CUDA, a CUDA build of
libdlk and a GPU.  Run by tests/python/test_dlk.py (t500) where those are
present, or by hand on any dataset:

    PYTHONPATH=DIR_OF_THE_INSTALLED_PACKAGE python3 tests/gpu/torch_cuda.py DATASET

Checks: tensors land on cuda:0 with the dataset's values (rows read on
the cpu through the library); a consumer on a side stream sees complete
batches (the stream ordering, no host sync); batches held across many
next() calls keep their values; buffers come back for reuse; loaders of
one Dataset share its pinned chunks; a second
CUDA device index is refused clearly when absent; and the time the host
spends per batch in the loop."""
import os
import sys
import time

import numpy as np
import torch

import dlk
import dlk.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import tap  # noqa: E402
from tap import test  # noqa: E402

URL = sys.argv[1]
ds = dlk.open(URL)
fixed = [t["name"] for t in ds.tensors if None not in t["shape"]]


def ref(name, row):
    return torch.from_numpy(np.array(ds.read(name, int(row))))


@test
def _():
    """batches on cuda:0 hold the dataset's values, every tensor"""
    n = 0
    for b in dlk.torch.loader(URL, device="cuda:0", batch_size=16, seed=1):
        for name, v in b.items():
            if name in (dlk.INDEX_KEY, dlk.PAD_KEY):  # row ids, on the cpu
                continue
            for j, row in enumerate(b.index):
                x = v[j] if isinstance(v, list) else v[j]
                assert x.device == torch.device("cuda:0"), x.device
                assert torch.equal(x.cpu(), ref(name, row)), (name, row)
        n += 1
    assert n == len(dlk.torch.loader(URL, device="cuda:0", batch_size=16))


@test
def _():
    """a consumer on a side stream sees each batch complete"""
    side = torch.cuda.Stream()
    sums, want = [], []
    with torch.cuda.stream(side):
        for b in dlk.torch.loader(URL, device="cuda:0", batch_size=8, seed=2):
            x = b[fixed[0]]
            sums.append(x.to(torch.float64).sum())   # queued on `side`
            want.append(sum(ref(fixed[0], r).to(torch.float64).sum()
                            for r in b.index))
    torch.cuda.synchronize()
    assert all(float(s) == float(w) for s, w in zip(sums, want))


@test
def _():
    """batches held across next() keep their values; freed ones are reused"""
    l = dlk.torch.loader(URL, device="cuda:0", batch_size=4, seed=3)
    held = [(b.index.clone(), b[fixed[0]]) for b in l]
    ptrs = {x.data_ptr() for _, x in held}
    assert len(ptrs) == len(held)
    for idx, x in held:
        for j, row in enumerate(idx):
            assert torch.equal(x[j].cpu(), ref(fixed[0], row))
    del held, x
    torch.cuda.synchronize()
    again = {b[fixed[0]].data_ptr() for b in l}
    assert again <= ptrs


@test
def _():
    """loaders of one Dataset share its pinned chunks (pin_cache): the
    second pins none, reads right, and keeps them after the first closes;
    one with no budget of its own reads them all; a loader of another
    handle pins its own"""
    shared = dlk.open(URL)

    def epoch(ld):
        for b in ld:
            x = b[fixed[0]]
            for j in (0, len(b.index) - 1):
                assert torch.equal(x[j].cpu(), ref(fixed[0], b.index[j]))

    kw = dict(device="cuda:0", batch_size=16, shuffle=False,
              pin_cache="auto", tensors=[fixed[0]])
    a = dlk.torch.loader(shared, **kw)
    epoch(a)
    pa = a.stats()["chunks_pinned"]
    assert pa >= 1, a.stats()
    assert a.stats()["chunks_shared"] == 0, a.stats()
    b = dlk.torch.loader(shared, **kw)
    epoch(b)
    assert b.stats()["chunks_pinned"] == 0, b.stats()
    assert b.stats()["chunks_shared"] == pa, (b.stats(), pa)
    # no budget of its own: what the others pinned costs it none
    d = dlk.torch.loader(shared, **{**kw, "pin_cache": 1})
    epoch(d)
    assert d.stats()["chunks_pinned"] == 0, d.stats()
    assert d.stats()["chunks_shared"] == pa, (d.stats(), pa)
    d.close()
    a.close()
    del a
    torch.cuda.synchronize()
    epoch(b)
    c = dlk.torch.loader(URL, **kw)
    epoch(c)
    assert c.stats()["chunks_pinned"] == pa, (c.stats(), pa)


@test
def _():
    """a missing device is a dlk.Error naming it"""
    n = torch.cuda.device_count()
    try:
        dlk.torch.loader(URL, device=f"cuda:{n}")
        raise AssertionError("no error")
    except dlk.Error as e:
        assert f"cuda:{n}" in str(e), str(e)


@test
def _():
    """the loop costs the host little per batch (printed)"""
    l = dlk.torch.loader(URL, device="cuda:0", batch_size=4, seed=4,
                         epochs=3)
    t0, n = time.perf_counter(), 0
    for b in l:
        n += 1
    dt = (time.perf_counter() - t0) / max(n, 1)
    print(f"# {n} batches, {dt * 1e6:.0f} us each (loader wait included)")


sys.exit(1 if tap.failed else 0)
