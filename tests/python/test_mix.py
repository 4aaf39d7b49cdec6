"""dlk.Loader over several datasets mixed by weight (TAP output), on the
cpu device (DLK_TEST_DEVICE=cuda:0 on a GPU).

    python3 tests/python/test_mix.py A B C

A and B have the same schema (3000 and 1000 rows, "labels" the class),
B a view "low" (labels < 3); C another image shape (t481 makes them)."""
import os
import pickle
import sys

import numpy as np

import dlk
import tap
from tap import test

A, B, C = sys.argv[1:4]
BATCH = 32


DEVICE = os.environ.get("DLK_TEST_DEVICE", "cpu")


def mix(**kw):
    kw.setdefault("device", DEVICE)
    kw.setdefault("batch_size", BATCH)
    kw.setdefault("seed", 7)
    srcs = kw.pop("sources", [(A, 0.7), (B, 0.3)])
    return dlk.Loader(srcs, **kw)


def rows(batches):
    return [list(zip(b.source.tolist(), b.index.tolist(), b.pad.tolist()))
            for b in batches]


def take(loader, n):
    """n batches, over as many epochs as that takes"""
    out = []
    while len(out) < n:
        before = len(out)
        for b in loader:
            out.append(b)
            if len(out) == n:
                break
        if len(out) == before:
            break
    return out


@test
def counts():
    """each batch 22 or 23 rows of A, batch.source and "dlk_source" name
    them, len() is the sources' rows in batches"""
    L = mix()
    assert len(L) == 125, len(L)
    n = 0
    for b in L:
        src = b.source
        assert src.dtype == np.uint16 and len(src) == BATCH
        assert (b[dlk.SOURCE_KEY] == src).all()
        assert int((src == 0).sum()) in (22, 23)
        n += 1
    assert n == 125, n


@test
def resume_same_world():
    """a state saved mid-epoch continues with the batches the run would
    have given, across the mix's epoch end"""
    full = rows(take(mix(), 200))
    L = mix()
    first = rows(take(L, 60))
    st = L.state_dict()
    L2 = mix(state=st)
    rest = rows(take(L2, 65))      # the rest of epoch 0
    rest += rows(take(L2, 75))     # and 75 of epoch 1
    assert first + rest == full, "resumed order differs"


@test
def resume_other_world():
    """two ranks resumed as three: of each source's first epoch, the rows
    taken before and those dealt after come once each"""
    before = [rows(take(mix(rank=r, world_size=2), 20)) for r in (0, 1)]
    L = mix(rank=0, world_size=2)
    take(L, 20)
    st = L.state_dict()
    after = [rows(take(mix(rank=r, world_size=3, state=st), 120))
             for r in range(3)]
    for s, n in ((0, 3000), (1, 1000)):
        got = [r for rk in before for bt in rk for (q, r, p) in bt
               if q == s and not p]
        k = len(got)
        share = -(-(n - k) // 3)
        for rk in after:
            ent = [(r, p) for bt in rk for (q, r, p) in bt if q == s]
            assert len(ent) >= share, (s, len(ent), share)
            got += [r for r, p in ent[:share] if not p]
        assert sorted(set(got)) == list(range(n)), (s, n, len(set(got)))
        assert len(got) == n, (s, len(got), n)


@test
def pickled():
    """a pickled mix opens again where it stood"""
    L = mix()
    take(L, 10)
    want = rows(take(mix(state=L.state_dict()), 5))
    L2 = pickle.loads(pickle.dumps(L))
    assert rows(take(L2, 5)) == want


@test
def deterministic():
    """the same seed gives the same batches, another seed others"""
    a, b, c = (rows(take(mix(seed=s), 5)) for s in (7, 7, 8))
    assert a == b and a != c


@test
def views():
    """a source's view: only its rows, by name in the tuple"""
    low = set(dlk.open(B, view="low").rows.tolist())
    L = mix(sources=[(A, 0.5), (B, 0.5, "low")], epoch_size=640)
    seen = set()
    for b in L:
        for q, r in zip(b.source.tolist(), b.index.tolist()):
            if q == 1:
                seen.add(r)
    assert seen and seen <= low, sorted(seen - low)[:5]


@test
def epoch_size():
    """epoch_size sets the mix's epoch; set_epoch restarts it"""
    L = mix(epoch_size=320)
    assert len(L) == 10
    assert len(list(L)) == 10
    L.set_epoch(0)
    assert len(list(L)) == 10


@test
def refused():
    """a shape that differs, a bad tuple or weight, a single loader's
    state: refused naming the fault"""
    for bad, why in (([(A, 1), (C, 1)], "source 1"),):
        try:
            mix(sources=bad)
            raise AssertionError("opened")
        except dlk.Error as e:
            assert why in str(e) and "images" in str(e), str(e)
    for bad in ([(A,)], [(A, "x")], [], [(A, 1, None, 4)]):
        try:
            mix(sources=bad)
            raise AssertionError(f"opened {bad}")
        except ValueError:
            pass
    try:
        mix(sources=[(A, -1), (B, 1)])
        raise AssertionError("negative weight opened")
    except dlk.Error as e:
        assert "weight" in str(e), str(e)
    one = dlk.Loader(A, device=DEVICE, batch_size=BATCH)
    try:
        mix(state=one.state_dict())
        raise AssertionError("a single loader's state restored a mix")
    except dlk.Error as e:
        assert "mix" in str(e), str(e)


sys.exit(1 if tap.failed else 0)
