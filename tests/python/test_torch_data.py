"""dlk.torch.IterableDataset under torch's own DataLoader and spawn (TAP
output), on the cpu device; needs torch (t520 runs it where torch is
importable).

    python3 tests/python/test_torch_data.py DAMAGED CLEAN KEY

The datasets are test_on_bad.py's."""
import pickle
import sys
import warnings

import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader

import dlk
import dlk.torch
import tap
from tap import test

BAD, CLEAN, KEY = sys.argv[1:4]
B = 16
_clean = dlk.open(CLEAN)
N = len(_clean)
LABEL = torch.tensor([int(_clean.read("labels", r).reshape(-1)[0])
                      for r in range(N)])


def dataset(url, **kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("batch_size", B)
    kw.setdefault("seed", 5)
    return dlk.torch.IterableDataset(url, **kw)


def rows(dl):
    out = []
    for b in dl:
        assert isinstance(b["dlk_index"], torch.Tensor)
        # the bytes gathered are those of the row the index names
        assert torch.equal(b["labels"].reshape(-1).long(),
                           LABEL[b["dlk_index"]].long())
        out.append([int(i) for i in b["dlk_index"]])
    return out


def child(rank, ds, q):
    q.put(rows(DataLoader(ds, batch_size=None)))


def main():
    """The tests, run at once (tap.test); not at import, as spawn's child
    imports this file."""
    @test
    def _():
        """DataLoader(ds, batch_size=None) gives the loader's batches whole:
        len() is the loader's, every row once an epoch, another order the
        next epoch"""
        ds = dataset(CLEAN)
        dl = DataLoader(ds, batch_size=None)
        assert len(dl) == len(ds.loader) == -(-N // B)
        e0, e1 = rows(dl), rows(dl)
        assert len(e0) == len(dl) and sorted(sum(e0, [])) == list(range(N))
        assert sorted(sum(e1, [])) == list(range(N)) and e0 != e1


    @test
    def _():
        """a DataLoader with worker processes is refused, naming num_workers=0"""
        dl = DataLoader(dataset(CLEAN), batch_size=None, num_workers=1)
        try:
            next(iter(dl))
        except RuntimeError as e:
            assert "num_workers=0" in str(e), str(e)
        else:
            raise AssertionError("a worker read the loader")


    @test
    def _():
        """the dataset pickles for mp.spawn: the child opens the loader again
        at its state and reads the rest of the epoch"""
        ds = dataset(CLEAN)
        it = iter(ds.loader)
        first = [[int(i) for i in next(it).index] for _ in range(2)]
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        mp.spawn(child, args=(ds, q), nprocs=1, join=True)
        rest = q.get()
        assert sorted(sum(first + rest, [])) == list(range(N))
        back = pickle.loads(pickle.dumps(ds))
        assert back.state_dict() == ds.state_dict()


    @test
    def _():
        """on_bad="skip" through dlk.torch: the clean run's batch sizes, the
        damaged part's rows in none"""
        clean = rows(DataLoader(dataset(CLEAN), batch_size=None))
        ds = dataset(BAD, on_bad="skip", max_bad=1000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = rows(DataLoader(ds, batch_size=None))
        assert [len(x) for x in got] == [len(x) for x in clean]
        (bad,) = ds.loader.bad_reads
        lo, hi = bad["first_row"], bad["first_row"] + bad["rows"]
        assert not any(lo <= r < hi for x in got for r in x)


if __name__ == "__main__":
    main()
    print(f"# {tap.failed} failed")
    sys.exit(1 if tap.failed else 0)
