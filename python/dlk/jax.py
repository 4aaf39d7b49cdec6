"""dlk batches as jax arrays, sharded over the devices of the host.

    import dlk.jax
    loader = dlk.jax.loader("s3://bucket/train", batch_size=256)
    for epoch in range(10):
        for batch in loader:
            x, y = batch["images"], batch["labels"]   # jax.Array
            state = train_step(state, x, y)           # jitted: runs where
                                                      # the shards are

JAX drives every GPU of a host from one process, where PyTorch runs one
process a GPU.  So this loader keeps one dlk.Loader a device of this
process: each is a rank (its device's place in `devices`, by default
jax.devices()), the world is every device of every process, and the
ranks of the host share its cores and memory as torchrun's processes
would.  A batch is one jax.Array a tensor, of batch_size rows a device
(global_batch_size = batch_size x len(devices) rows in all; give either,
batch_size being 256 by default), sharded along its first axis
over a one-axis mesh `("data",)` of those devices (`loader.sharding`);
each device's rows are copied to it by its own loader and come to JAX
through DLPack without a copy, JAX's stream waiting for the loader's
copy on the device.  Across processes (jax.distributed) each process
holds its own devices' rows, and every process must run the same loop.
With pin_cache, the loaders share the chunks one of them pinned: each is
pinned once for all the GPUs of the process.

By default the batches hold every tensor of a fixed shape; one whose
shape varies by sample (an ingest's `key` text) cannot be one array, and
is read by row (`loader.dataset.read("key", row).tobytes().decode()`
for a row of batch.index, a dataset row).  The options are dlk.Loader's,
less device, rank, world_size and local_world_size, which the devices
decide.
"""
import numpy as _np
import jax as _jax
from jax.sharding import Mesh as _Mesh
from jax.sharding import NamedSharding as _NamedSharding
from jax.sharding import PartitionSpec as _P

import dlk as _dlk
from . import _core


class Batch(dict):
    """{tensor name: jax.Array, sharded over the devices}, plus .index
    (numpy int64: the dataset rows of this process's devices, in the
    mesh's order), .pad (numpy bool: padding repeats in the last batch
    unless drop_last), .epoch and .step."""
    __slots__ = ("index", "pad", "source", "epoch", "step")


def _dlk_device(d):
    """The dlk device that feeds jax device d."""
    if d.platform == "cpu":
        return "cpu"
    if d.platform in ("gpu", "cuda"):
        return f"cuda:{d.local_hardware_id}"
    raise ValueError(f"dlk.jax: device {d} ({d.platform}): dlk streams to "
                     "CUDA GPUs and the cpu")


class Loader:
    """Batches sharded over `devices` (default jax.devices()); see the
    module's text, and dlk.Loader for the options."""

    def __init__(self, url_or_ds, batch_size=None, devices=None,
                 global_batch_size=None, **kw):
        for k in ("device", "rank", "world_size", "local_world_size",
                  "pad_last"):
            if k in kw:
                raise ValueError(f"dlk.jax.Loader: {k}= is decided by the "
                                 "devices (pass devices= instead)")
        devices = list(_jax.devices() if devices is None else devices)
        if not devices:
            raise ValueError("dlk.jax.Loader: no devices")
        if global_batch_size is not None:
            # JAX code states the batch of the whole step; each device
            # takes an equal share of it
            if isinstance(global_batch_size, bool) or \
                    not isinstance(global_batch_size, int) or \
                    global_batch_size <= 0 or global_batch_size % len(devices):
                raise ValueError(
                    f"dlk.jax.Loader: global_batch_size={global_batch_size}"
                    f" is not a positive multiple of the {len(devices)} "
                    "devices (each takes an equal share)")
            if batch_size is not None:
                raise ValueError("dlk.jax.Loader: give batch_size= (rows a "
                                 "device) or global_batch_size= (rows a "
                                 "step), not both")
            batch_size = global_batch_size // len(devices)
        elif batch_size is None:
            batch_size = 256
        me = _jax.process_index()
        local = [d for d in devices if d.process_index == me]
        if not local:
            raise ValueError("dlk.jax.Loader: none of the devices is this "
                             f"process's (process {me})")
        ds = src = url_or_ds
        if isinstance(url_or_ds, (list, tuple)):
            # a mix (dlk.Loader's list of sources): the first's schema,
            # which every source shares
            src = _dlk._mix_sources(url_or_ds, kw.pop("at", None))
            ds = src[0][0]
        elif not isinstance(ds, _dlk.Dataset):
            ds = src = _dlk.open(url_or_ds, at=kw.pop("at", None),
                                 view=kw.pop("view", None))
        names = kw.get("tensors")
        if names is None:
            # every fixed-shape tensor: the variable ones (an ingest's
            # `key` text, say) cannot be one array, and are read by row
            kw["tensors"] = [t["name"] for t in ds.tensors
                             if None not in t["shape"]]
            if not kw["tensors"]:
                raise ValueError("dlk.jax.Loader: no tensor of the dataset "
                                 "has a fixed shape")
        for t in ds.tensors:
            if names is not None and t["name"] in names and None in t["shape"]:
                raise ValueError(
                    f"dlk.jax.Loader: tensor '{t['name']}' varies in shape "
                    "by sample; a sharded batch needs fixed shapes (leave "
                    "it out of tensors=, and read it by batch.index)")
        self.dataset = ds
        self.devices = devices
        self.local_devices = local
        self.batch_size = batch_size
        self.global_batch_size = batch_size * len(devices)
        self.sharding = _NamedSharding(_Mesh(_np.array(devices), ("data",)),
                                       _P("data"))
        # the loaders of this process are ranks of the host: they share
        # its cores and memory with each other and with any other
        # process the launcher put there
        host = _core.launch_env()[3] * len(local)
        self._loaders = []
        try:
            for d in local:
                self._loaders.append(_dlk.Loader(
                    src, batch_size=batch_size, device=_dlk_device(d),
                    rank=devices.index(d), world_size=len(devices),
                    local_world_size=host, pad_last=True, **kw))
        except BaseException:
            self.close()
            raise

    def __len__(self):
        """Batches an epoch (the same on every device)."""
        return len(self._loaders[0])

    def _shard(self, v, d):
        # on its GPU, no copy; the cpu loader's memory is the first cpu
        # device's, and another cpu device takes a copy
        return _jax.dlpack.from_dlpack(v, device=d)

    def _assemble(self, parts):
        first = parts[0]
        out = Batch()
        for name in first:
            if name in (_dlk.INDEX_KEY, _dlk.PAD_KEY, _dlk.SOURCE_KEY):
                continue
            shards = [self._shard(b[name], d)
                      for b, d in zip(parts, self.local_devices)]
            shape = (shards[0].shape[0] * len(self.devices),) + \
                tuple(shards[0].shape[1:])
            out[name] = _jax.make_array_from_single_device_arrays(
                shape, self.sharding, shards)
        out.index = _np.concatenate([b.index for b in parts]).astype(_np.int64)
        out.pad = _np.concatenate([b.pad for b in parts]).astype(bool)
        out.source = None
        if first.source is not None:
            out.source = _np.concatenate([b.source for b in parts])
        out.epoch, out.step = first.epoch, first.step
        return out

    def __iter__(self):
        """The sharded batches of one epoch (as dlk.Loader's)."""
        its = [iter(ld) for ld in self._loaders]
        while True:
            parts = [next(it, None) for it in its]
            if all(p is None for p in parts):
                return
            if any(p is None for p in parts):
                # the ranks of one epoch get equal batches: a loader that
                # ends early is a bug, not data to drop
                raise RuntimeError("dlk.jax.Loader: the devices' loaders "
                                   "ended at different batches")
            yield self._assemble(parts)

    def set_epoch(self, epoch):
        for ld in self._loaders:
            ld.set_epoch(epoch)

    def state_dict(self):
        """Where the epoch stands; the same for every device's loader, so
        one state resumes them all (at any number of devices)."""
        return self._loaders[0].state_dict()

    def load_state_dict(self, state):
        for ld in self._loaders:
            ld.load_state_dict(state)

    def stats(self):
        """Each device's loader's stats (dlk.Loader.stats), in the order
        of local_devices."""
        return [ld.stats() for ld in self._loaders]

    def close(self):
        for ld in self._loaders:
            ld.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def loader(url_or_ds, **kw):
    """A dlk.jax.Loader over jax.devices() (or devices=)."""
    return Loader(url_or_ds, **kw)
