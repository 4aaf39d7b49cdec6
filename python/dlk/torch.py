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

Where a torch DataLoader is expected (a framework or script that builds
one), dlk.torch.IterableDataset(url_or_loader, **kw) is the loader as an
IterableDataset of whole batches:

    ds = dlk.torch.IterableDataset("s3://bucket/train", batch_size=256)
    dl = torch.utils.data.DataLoader(ds, batch_size=None)  # num_workers=0

python/README.md says how it differs from a DataLoader over a map-style
dataset.
"""
import numpy as _np
import torch as _torch

import dlk as _dlk


class Batch(dict):
    """{tensor name: torch.Tensor} (variable-shape tensors: a list of
    tensors), plus "dlk_index" (torch int64, the dataset rows, on the
    cpu) and "dlk_pad" (torch bool, padding repeats), also as .index and
    .pad, from a mix "dlk_source" (torch int64) as .source, and .epoch
    and .step (see dlk.Batch)."""
    __slots__ = ("index", "pad", "source", "epoch", "step")


def _convert(v):
    if isinstance(v, list):
        return [_torch.from_dlpack(x) for x in v]
    return _torch.from_dlpack(v)


class Loader(_dlk.Loader):
    """dlk.Loader whose batches hold torch tensors (see dlk.Loader for the
    options, and for the attributes through which code written for a
    DataLoader, such as accelerate's skip_first_batches, rebuilds one)."""

    def _next(self):
        b = super()._next()
        if b is None:
            return None
        out = Batch((k, _convert(v)) for k, v in b.items()
                    if k not in (_dlk.INDEX_KEY, _dlk.PAD_KEY,
                                 _dlk.SOURCE_KEY))
        out.index = _torch.from_numpy(b.index.astype(_np.int64))
        out.pad = _torch.from_numpy(b.pad.copy())
        # plain keys too: a framework that rebuilds the dict (Lightning's
        # batch transfer, accelerate's send_to_device) keeps them, and
        # moves them to the device with the rest
        out[_dlk.INDEX_KEY], out[_dlk.PAD_KEY] = out.index, out.pad
        out.source = None
        if b.source is not None:
            out.source = _torch.from_numpy(b.source.astype(_np.int64))
            out[_dlk.SOURCE_KEY] = out.source
        out.epoch, out.step = b.epoch, b.step
        return out


# The ImageNet recipe as augmentation specs (dlk.Loader's augment=):
# RandomResizedCrop(224) + RandomHorizontalFlip + Normalize, and
# Resize(256) + CenterCrop(224) + Normalize; bfloat16 NCHW.
IMAGENET_TRAIN = "imagenet-train"
IMAGENET_EVAL = "imagenet-eval"


def loader(url_or_ds, transform=None, **kw):
    """A dlk.torch.Loader: dlk.Loader's options (device defaults to
    "cuda", that is cuda:LOCAL_RANK modulo the GPUs this process sees:
    dlk.local_gpu(); "cpu" works too).  transform: an augmentation spec
    (IMAGENET_TRAIN, IMAGENET_EVAL, or fields as dlk.Loader's augment=),
    or an object whose `spec` attribute is one, done in the loader as
    each batch is gathered."""
    if transform is not None:
        if "augment" in kw:
            raise TypeError("transform= and augment= say the same: give one")
        spec = transform if isinstance(transform, str) else \
            getattr(transform, "spec", None)
        if not isinstance(spec, str):
            raise TypeError("transform: an augmentation spec (str) or an "
                            "object with a str `spec`")
        kw["augment"] = spec
    return Loader(url_or_ds, **kw)


class IterableDataset(_torch.utils.data.IterableDataset):
    """A dlk.torch.Loader (given, or made from a URL or dlk.Dataset and
    Loader's options) as a torch IterableDataset that yields its batches
    whole: `torch.utils.data.DataLoader(ds, batch_size=None)` takes it
    (batch_size=None: the batches are made already).  Each iter() is
    one epoch of the loader, len() its batches.  The loader reads on its
    own threads: a DataLoader over it takes num_workers=0 (in a worker
    process, iter() raises, as the worker would read its own copy of
    every row).  It pickles as the loader's options and state (mp.spawn,
    Lightning's ddp_spawn): the copy opens again where it is unpickled,
    with that process's rank."""

    def __init__(self, url_or_loader, **kw):
        if isinstance(url_or_loader, _dlk.Loader):
            if kw:
                raise TypeError("options are for a URL or a dlk.Dataset; "
                                "the loader given has its own")
            self.loader = url_or_loader
        else:
            self.loader = Loader(url_or_loader, **kw)

    def __iter__(self):
        w = _torch.utils.data.get_worker_info()
        if w is not None:
            raise RuntimeError(
                f"dlk.torch.IterableDataset in DataLoader worker {w.id} of "
                f"{w.num_workers}: use num_workers=0 (the loader reads on "
                "its own threads; each worker would read every row again)")
        return iter(self.loader)

    def __len__(self):
        return len(self.loader)

    def set_epoch(self, epoch):
        """As Loader.set_epoch (DistributedSampler's name for it)."""
        self.loader.set_epoch(epoch)

    def state_dict(self):
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self.loader.load_state_dict(state)
