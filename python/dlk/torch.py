"""dlk batches as torch tensors.

    import dlk.torch
    loader = dlk.torch.loader("s3://bucket/train", batch_size=256)
    for epoch in range(10):
        loader.set_epoch(epoch)
        for batch in loader:
            x, y = batch["images"], batch["labels"]   # on cuda:LOCAL_RANK

Tensors come through DLPack without a copy.  On a GPU, torch hands its
current stream to the batch: that stream waits (on the device, through an
event) for the loader's copy and gather; the host never waits.  A batch's
memory stays valid while any tensor made from it lives (the loader then
gathers into other buffers), and is reused once they are all freed: the
loader's next writes into it wait for the stream that read it.  Work that
reads a batch on another stream than the one current at conversion must
keep the tensor alive (or call `record_stream`) until that work is done,
as with any memory torch did not allocate.
"""
import numpy as _np
import torch as _torch

import dlk as _dlk


class Batch(dict):
    """{tensor name: torch.Tensor} (variable-shape tensors: a list of
    tensors), plus "dlk_index" (torch int64, the dataset rows, on the
    cpu) and "dlk_pad" (torch bool, padding repeats), also as .index and
    .pad, and .epoch and .step (see dlk.Batch)."""
    __slots__ = ("index", "pad", "epoch", "step")


def _convert(v):
    if isinstance(v, list):
        return [_torch.from_dlpack(x) for x in v]
    return _torch.from_dlpack(v)


class Loader(_dlk.Loader):
    """dlk.Loader whose batches hold torch tensors (see dlk.Loader for the
    options)."""

    def _next(self):
        b = super()._next()
        if b is None:
            return None
        out = Batch((k, _convert(v)) for k, v in b.items()
                    if k not in (_dlk.INDEX_KEY, _dlk.PAD_KEY))
        out.index = _torch.from_numpy(b.index.astype(_np.int64))
        out.pad = _torch.from_numpy(b.pad.copy())
        # plain keys too: a framework that rebuilds the dict (Lightning's
        # batch transfer, accelerate's send_to_device) keeps them, and
        # moves them to the device with the rest
        out[_dlk.INDEX_KEY], out[_dlk.PAD_KEY] = out.index, out.pad
        out.epoch, out.step = b.epoch, b.step
        return out


def loader(url_or_ds, **kw):
    """A dlk.torch.Loader: dlk.Loader's options (device defaults to
    "cuda", that is cuda:LOCAL_RANK modulo the GPUs this process sees:
    dlk.local_gpu(); "cpu" works too)."""
    return Loader(url_or_ds, **kw)
