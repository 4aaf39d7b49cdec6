"""A mixing dlk.torch loader on a GPU (TAP output): needs torch with CUDA,
a CUDA build of libdlk and a GPU; Lightning where importable.

    PYTHONPATH=DIR_OF_THE_INSTALLED_PACKAGE python3 tests/gpu/mix_torch.py A B

A and B: datasets of the same schema.  Checks: every sample of a mixed
batch on cuda:0 holds its source's row (read on the cpu); the batches'
sources and rows are those of the same mix on the cpu; a resumed mix on
the GPU continues as the run would; Lightning fits two epochs of it,
each of len(loader) batches."""
import os
import sys

import numpy as np
import torch

import dlk
import dlk.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import tap  # noqa: E402
from tap import test  # noqa: E402

A, B = sys.argv[1:3]
SRC = [(A, 0.7), (B, 0.3)]
dss = [dlk.open(A), dlk.open(B)]
names = [t["name"] for t in dss[0].tensors if None not in t["shape"]]


def order(device, n=None, **kw):
    L = dlk.torch.loader(SRC, device=device, batch_size=64, seed=3, **kw)
    out = []
    for b in L:
        out.append((b.source.tolist(), b.index.tolist()))
        if n and len(out) == n:
            break
    return out


@test
def _():
    """every sample of a mixed batch on cuda:0 is its source's row"""
    n = 0
    for b in dlk.torch.loader(SRC, device="cuda:0", batch_size=64, seed=1):
        for name in names:
            v = b[name]
            assert v.device == torch.device("cuda:0"), v.device
            for j in range(0, len(b.index), 7):
                s, row = int(b.source[j]), int(b.index[j])
                want = torch.from_numpy(np.array(dss[s].read(name, row)))
                assert torch.equal(v[j].cpu(), want), (name, s, row)
        n += 1
        if n == 20:
            break
    assert n == 20, n


@test
def _():
    """the GPU's mix is the cpu's: the same sources and rows in order"""
    assert order("cuda:0") == order("cpu")


@test
def _():
    """a mix resumed on the GPU continues as the run would"""
    L = dlk.torch.loader(SRC, device="cuda:0", batch_size=64, seed=3)
    for k, b in enumerate(L):
        if k == 9:
            break
    st = L.state_dict()
    rest = order("cuda:0", 5, state=st)
    assert rest == order("cuda:0", 15)[10:15]


try:
    import lightning as pl
except ImportError:
    try:
        import pytorch_lightning as pl
    except ImportError:
        pl = None

if pl is None:
    print("ok - Lightning fits a mix # SKIP lightning not importable")
else:
    @test
    def _():
        """Lightning fits two epochs of a mix, each of len(loader)
        batches, the sources in their shares"""
        L = dlk.torch.loader(SRC, device="cuda:0", batch_size=64, seed=2)
        seen = {0: 0, 1: 0}
        per_epoch = []

        class M(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(1))

            def training_step(self, batch, i):
                for s in (0, 1):
                    seen[s] += int((batch["dlk_source"] == s).sum())
                x = batch[names[0]].float().mean()
                return (self.w - x) ** 2

            def on_train_epoch_end(self):
                per_epoch.append(self.trainer.global_step)

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.01)

        t = pl.Trainer(max_epochs=2, accelerator="gpu", devices=1,
                       logger=False, enable_checkpointing=False,
                       enable_progress_bar=False, enable_model_summary=False)
        t.fit(M(), train_dataloaders=L)
        n = len(L)
        assert per_epoch == [n, 2 * n], (per_epoch, n)
        share = seen[0] / (seen[0] + seen[1])
        assert abs(share - 0.7) < 0.01, share


sys.exit(1 if tap.failed else 0)
