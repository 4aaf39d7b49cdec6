"""dlk.Loader(on_bad=..., max_bad=...) over a dataset with one damaged
part (TAP output), on the cpu device.

    python3 tests/python/test_on_bad.py DAMAGED CLEAN KEY

DAMAGED and CLEAN are the same dataset (t520 makes them: each row's
"labels" value its own), one byte of part 1 of images chunk KEY flipped
in DAMAGED."""
import pickle
import sys
import warnings

import numpy as np

import dlk
import tap
from tap import test

BAD, CLEAN, KEY = sys.argv[1:4]
B = 16
_clean = dlk.open(CLEAN)
LABEL = [int(_clean.read("labels", r).reshape(-1)[0]) for r in range(len(_clean))]


def loader(url, **kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("batch_size", B)
    kw.setdefault("seed", 5)
    return dlk.Loader(url, **kw)


def epoch(ld):
    """(rows of each batch, and whether every position's labels value is
    its row's: the bytes gathered are those of the row the index names)."""
    out, consistent = [], True
    for b in ld:
        idx = [int(i) for i in b.index]
        labels = np.from_dlpack(b["labels"]).reshape(-1)
        consistent &= [int(v) for v in labels] == [LABEL[i] for i in idx]
        out.append(idx)
    return out, consistent


CLEAN_ROWS, _ = epoch(loader(CLEAN))


@test
def _():
    """by default a damaged part raises dlk.Error naming the chunk"""
    try:
        epoch(loader(BAD))
    except dlk.Error as e:
        assert e.code == 4 and KEY in str(e) and "part 1" in str(e), str(e)
    else:
        raise AssertionError("no error")


SKIP = {}


@test
def _():
    """on_bad="skip": the epoch completes with the clean run's batches and
    sizes, the damaged part's rows in none (its span's others all there),
    one BadReadWarning naming the chunk and part, loader.bad_reads and
    stats() counting it"""
    ld = loader(BAD, on_bad="skip", max_bad=1000)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got, consistent = epoch(ld)
    assert [len(x) for x in got] == [len(x) for x in CLEAN_ROWS], got
    assert len(ld) == len(CLEAN_ROWS)
    assert consistent, "a replaced position's labels are not its row's"
    (bad,) = ld.bad_reads
    assert bad["object"] == "chunks/images/" + KEY, bad
    assert (bad["tensor"], bad["part0"], bad["part1"], bad["epoch"],
            bad["code"]) == ("images", 1, 2, 0, 4), bad
    assert "part 1" in bad["why"], bad
    lo, hi = bad["first_row"], bad["first_row"] + bad["rows"]
    rows = {r for x in got for r in x}
    assert rows == set(range(sum(map(len, CLEAN_ROWS)))) - set(range(lo, hi))
    msgs = [str(x.message) for x in w if x.category is dlk.BadReadWarning]
    assert len(msgs) == 1 and KEY in msgs[0] and "part 1 replaced" in msgs[0], msgs
    st = ld.stats()
    assert st["reads_bad"] == 1 and st["rows_replaced"] == hi - lo, st
    SKIP.update(rows=got, bad=bad)


@test
def _():
    """past max_bad the epoch raises dlk.Error, as without skip"""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            epoch(loader(BAD, on_bad="skip", max_bad=3))
    except dlk.Error as e:
        assert "more than max_bad 3" in str(e) and KEY in str(e), str(e)
    else:
        raise AssertionError("no error")


@test
def _():
    """on_bad and max_bad are checked"""
    for kw in ({"on_bad": "maybe"}, {"max_bad": 0}, {"max_bad": "5"}):
        try:
            loader(BAD, **kw)
        except ValueError as e:
            assert list(kw)[0] in str(e), str(e)
        else:
            raise AssertionError(f"{kw} taken")


@test
def _():
    """a pickled loader (mp.spawn, ddp_spawn) keeps on_bad and max_bad:
    its copy skips the same rows, and its max_bad holds"""
    ld = loader(BAD, on_bad="skip", max_bad=1000)
    copy = pickle.loads(pickle.dumps(ld))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, _ = epoch(copy)
    assert got == SKIP["rows"], "the copy's batches differ"
    assert copy.bad_reads == [SKIP["bad"]], copy.bad_reads
    few = pickle.loads(pickle.dumps(loader(BAD, on_bad="skip", max_bad=3)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            epoch(few)
    except dlk.Error as e:
        assert "more than max_bad 3" in str(e), str(e)
    else:
        raise AssertionError("the copy's max_bad did not hold")


print(f"# {tap.failed} failed")
sys.exit(1 if tap.failed else 0)
