"""dlk: read and stream dlk datasets from Python.

    ds = dlk.open("s3://bucket/train")          # or a path, file://PATH
    ds.tensors, ds.commit, len(ds), ds[i], ds.log()

    loader = dlk.Loader(ds, batch_size=256, device="cuda")
    for batch in loader:                         # one epoch per loop
        images = torch.from_dlpack(batch["images"])   # no copy
        rows = batch.index                       # the dataset rows

Every call goes to libdlk (include/dlk.h); failures raise dlk.Error with
the library's message, its status number (.code, .reason) and the code
the `dlk` command exits with for it (.exit_code: 3 failed, 4 a
concurrent writer).
"""
import atexit as _atexit
import json as _json

import numpy as _np

from . import _core
from ._core import Error, Tensor

__all__ = ["open", "Dataset", "Index", "Loader", "Batch", "Tensor", "Error",
           "launch_env", "local_gpu", "cuda_available", "__version__"]
__version__ = _core.version()
# at exit, loaders still open are not closed: a close would wait for the
# storage reads in flight (after a Ctrl-C during a slow read, say)
_atexit.register(_core._at_exit)

# dlk dtype names -> numpy (bf16 has no numpy type: its raw 16 bits)
_NP = {"u8": _np.uint8, "i8": _np.int8, "u16": _np.uint16, "i16": _np.int16,
       "u32": _np.uint32, "i32": _np.int32, "u64": _np.uint64,
       "i64": _np.int64, "f16": _np.float16, "bf16": _np.uint16,
       "f32": _np.float32, "f64": _np.float64, "bool": _np.bool_}


def launch_env():
    """(rank, world_size, local_rank) as torchrun, MPI or Slurm set them
    (the same variables `dlk bench-stream` reads); (0, 1, 0) without."""
    return _core.launch_env()[:3]


def local_gpu():
    """The index of the GPU this process takes by default (device="cuda"):
    its local rank modulo the GPUs it sees, so that under a launcher that
    gives each process GPUs of its own through CUDA_VISIBLE_DEVICES
    (Slurm's --gpus-per-task) every process takes its first; None when
    there is no GPU."""
    return _core.local_gpu()


def cuda_available():
    """(True, "") when this build has CUDA and a GPU is there, else
    (False, why)."""
    return _core.cuda_available()


class Dataset:
    """A dataset opened at its head or at a commit (`at`: "main",
    "main~2", an id or a unique prefix); with `view`, the rows of that
    view only (`dlk query --save-view`): len() counts them and ds[i] is
    the view's i-th row."""

    def __init__(self, url, at=None, view=None):
        self._ds = _core.Dataset(str(url), at)
        self.url = self._ds.url
        self.at = at
        self.view = view
        self._tensors = self._ds.tensors()
        self._index = {t["name"]: i for i, t in enumerate(self._tensors)}
        self._rows = None
        if view is not None:
            self._rows = _np.frombuffer(self._ds.view_rows(view), dtype="<u8")

    @property
    def rows(self):
        """The dataset rows this Dataset reads: the view's (a numpy u64
        array), or None for every row."""
        return self._rows

    @property
    def views(self):
        """The views of the state opened: dicts of name, rows,
        dataset_rows, object, query."""
        return self._ds.views()

    @property
    def tensors(self):
        """The tensors in schema order: dicts of name, kind, dtype, shape
        (None where a dimension varies), classes (class labels' names),
        samples, chunks, stored_bytes, raw_bytes."""
        return [dict(t) for t in self._tensors]

    @property
    def commit(self):
        """The commit id of the state opened (None before any commit)."""
        return self._ds.head

    def __len__(self):
        """Rows: the sample count every tensor shares (the smallest), or
        the view's rows."""
        if self._rows is not None:
            return len(self._rows)
        return min((t["samples"] for t in self._tensors), default=0)

    def __getitem__(self, row):
        """Row `row` as {tensor name: numpy array}; a class label also
        gives "NAME_class", its class name (None when out of range), and
        a text tensor "NAME_text", its bytes decoded as UTF-8 (an
        ingest's `key`: the object the row came from)."""
        n = len(self)
        if row < 0:
            row += n
        if not 0 <= row < n:
            raise IndexError(f"row {row} is not in a dataset of {n} rows")
        if self._rows is not None:
            row = int(self._rows[row])
        out = {}
        for i, t in enumerate(self._tensors):
            dtype, shape, data = self._ds.read(i, row)
            a = _np.frombuffer(data, dtype=_NP[dtype]).reshape(shape)
            out[t["name"]] = a
            if t["kind"] == "class_label" and t["classes"]:
                v = int(a.reshape(-1)[0]) if a.size else -1
                out[t["name"] + "_class"] = (
                    t["classes"][v] if 0 <= v < len(t["classes"]) else None)
            elif t["kind"] == "text" and a.dtype == _np.uint8:
                out[t["name"] + "_text"] = a.tobytes().decode(
                    "utf-8", "replace")
        return out

    def read(self, tensor, row):
        """One sample of one tensor as a numpy array."""
        if tensor not in self._index:
            raise KeyError(f"no tensor '{tensor}' in '{self.url}'")
        dtype, shape, data = self._ds.read(self._index[tensor], row)
        return _np.frombuffer(data, dtype=_NP[dtype]).reshape(shape)

    def index(self, tensor, where=None, device="auto", threads=0,
              verify=True):
        """A resident vector index over embedding tensor `tensor` (f32 or
        f64 [D]): the rows that `where` (an expression, dlk-query(1))
        keeps, of this Dataset's view when it has one, read once (their
        chunks' checksums checked unless verify=False) and kept in host
        memory (device "cpu") or in GPU 0's ("cuda"; "auto": the GPU
        when there is one and the rows fit, else the CPU).  For many
        searches in one process; it holds rows x D x 4 bytes (8 for f64)
        on the device until closed.  Its searches give `dlk query
        --near`'s rows and scores, bit for bit."""
        return Index(self._ds.index(tensor, where, self.view, device,
                                    threads, verify), tensor)

    def log(self, at=None, max=0):
        """The history from `at` (default main), newest first: dicts of
        id, parent, time, message, bytes_added, chunks_added, samples."""
        return self._ds.log(at, max)

    def __repr__(self):
        return f"dlk.Dataset({self.url!r}, {len(self)} rows)"


class Index:
    """Rows of an embedding tensor held in host or GPU memory
    (Dataset.index): search() scores every one of them for each query.
    len() is its rows; close() (or leaving a `with` block) frees them."""

    def __init__(self, core, tensor):
        self._ix = core
        self.tensor = tensor
        info = core.info()
        self.dim = info["dim"]
        self.nbytes = info["nbytes"]     # on the device
        self.device = info["device"]     # "cpu" or "cuda"
        self._rows = info["rows"]

    def search(self, q, k=10, metric="cosine"):
        """The k rows nearest to q by metric ("cosine", "l2" or "ip"):
        q of D values gives (rows, scores), numpy arrays of k (fewer when
        the index has fewer rows), best first; q of shape [Q, D] gives
        arrays of shape [Q, k], row i of each for query i.  Scores are
        the metric's values (a distance for l2)."""
        a = _np.ascontiguousarray(q, dtype=_np.float32)
        one = a.ndim == 1
        if one:
            a = a.reshape(1, -1)
        if a.ndim != 2 or a.shape[1] != self.dim or not a.shape[0]:
            raise ValueError(f"queries of shape {tuple(_np.shape(q))}; the "
                             f"index takes [{self.dim}] or [Q, {self.dim}]")
        nq = a.shape[0]
        rows, scores, n = self._ix.search(a, nq, int(k), metric)
        rows = _np.frombuffer(rows, dtype="<u8").reshape(nq, k)[:, :n]
        scores = _np.frombuffer(scores, dtype="<f8").reshape(nq, k)[:, :n]
        rows = rows.astype(_np.int64)
        return (rows[0], scores[0]) if one else (rows, scores)

    def __len__(self):
        return self._rows

    def close(self):
        """Free the rows (on the GPU too); search() then fails."""
        self._ix.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"dlk.Index({self.tensor!r}, {self._rows} rows x {self.dim}, "
                f"{self.device})")


def open(url, at=None, view=None):  # noqa: A001 - the package's verb
    """Open a dataset: a local path, file://PATH or s3://bucket/prefix;
    `view` reads only that view's rows."""
    return Dataset(url, at, view)


class Batch(dict):
    """One batch: {tensor name: dlk.Tensor} (variable-shape tensors: a
    list with one dlk.Tensor per sample), plus

      .index  numpy u64 array: the dataset row of each sample
      .pad    numpy bool array: True where a sample repeats as padding
              (the last batch of an epoch, unless drop_last)
      .epoch, .step

    The memory stays valid as long as any of its tensors (or anything a
    framework made from them with from_dlpack) is alive."""
    __slots__ = ("index", "pad", "epoch", "step")


_PIN_AUTO = (1 << 64) - 1  # DLK_PIN_CACHE_AUTO


def _parse_bytes(v, name):
    """A size: an int, or a string of digits with K, M or G after them."""
    if v is None:
        return 0
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    s = str(v).strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper())
    digits = s[:-1] if mult else s
    if not digits.isdigit():
        raise ValueError(f"{name}={v!r} is not a size (bytes, or a number "
                         "with K, M or G after it)")
    return int(digits) * (mult or 1)


class Loader:
    """Shuffled, sharded, prefetched batches of a dataset.

    url_or_ds   a URL or a dlk.Dataset
    batch_size  samples per batch
    shuffle, seed   the order (the same on every rank for a seed)
    tensors     names to load (default all)
    device      "cuda" (cuda:LOCAL_RANK, modulo the GPUs this process
                sees: dlk.local_gpu()), "cuda:N", "cpu", or "auto" (cuda
                when a GPU is there, else cpu)
    epochs      each `for batch in loader` runs one epoch; with E, nothing
                is read ahead past the E-th, and loops after it are empty
    drop_last   drop the samples that do not fill a last batch (else it is
                padded with repeats, flagged in batch.pad)
    rank, world_size  default: the launcher's (torchrun, MPI, Slurm)
    local_world_size  the ranks on this host that share its cores and
                memory (default: the launcher's LOCAL_WORLD_SIZE, or 1);
                a process that runs several loaders, one a GPU, counts
                them all (dlk.jax does)
    at          a commit to read (with a URL)
    view        stream only this view's rows (default: the Dataset's view,
                or every row)
    whole_chunks  read every chunk whole, not in spans of its parts (a
                window of whole chunks mixes a class-sorted dataset less;
                dlk-bench-stream(1) --whole-chunks)
    memory      bytes for chunk buffers (int, or "4G"); default derived;
                at most half of the host's (or cgroup's) memory, shared
                among the ranks on this host
    pin_cache   on a GPU, bytes (int, or "64G") of a local dataset's page
                cache to keep mapped and pinned across epochs, or "auto"
                for half the memory (a rank's share), less the budget:
                later epochs copy it with no read and no copy, the pages
                counted in RSS (default 0: read into pinned buffers);
                worth it on several GPUs of one host, where the host's
                memory bounds the copy (dlk-bench-stream(1) --pin-cache)
    workers     I/O threads (default: the cores, shared among the ranks
                on this host as LOCAL_WORLD_SIZE says, at most 32; a
                quarter fewer on a GPU from local files)
    state       a state_dict() to continue from (any world or batch size)

    len(loader) is the number of batches this rank gets in an epoch.
    Reading starts as the Loader is made: make it before the model, and
    building the model fills the first window."""

    def __init__(self, url_or_ds, batch_size=256, shuffle=True, seed=0,
                 tensors=None, device="cuda", epochs=None, drop_last=False,
                 rank=None, world_size=None, at=None, memory=None,
                 workers=None, state=None, window=None, prefetch=None,
                 verify=True, view=None, whole_chunks=False,
                 pin_cache=None, local_world_size=None):
        if isinstance(url_or_ds, Dataset):
            if at is not None and at != url_or_ds.at:
                raise ValueError("at= is for a URL; open the Dataset at it")
            self.dataset = url_or_ds
            view = url_or_ds.view if view is None else view
        else:
            self.dataset = Dataset(url_or_ds, at)
        env_rank, env_world, local_rank, local_world = _core.launch_env()
        rank = env_rank if rank is None else rank
        world_size = env_world if world_size is None else world_size
        if local_world_size is not None:
            local_world = int(local_world_size)
            if local_world < 1:
                raise ValueError(f"local_world_size {local_world_size}: "
                                 "at least 1")
        if device == "auto":
            device = "cuda" if _core.cuda_available()[0] else "cpu"
        if device == "cuda":
            gpu = _core.local_gpu()
            # without a GPU the device fails to open, with its reason
            device = f"cuda:{local_rank if gpu is None else gpu}"
        if isinstance(state, dict):
            state = _json.dumps(state["dlk"] if "dlk" in state else state)
        self.device = device
        self.batch_size = batch_size
        self.world_size = world_size
        self.epochs = epochs
        self._epochs_done = 0
        try:
            self._l = _core.Loader(
                self.dataset._ds, device, batch_size=batch_size,
                shuffle=bool(shuffle), seed=seed,
                tensors=list(tensors) if tensors is not None else None,
                epochs=epochs or 0, drop_last=bool(drop_last), rank=rank,
                world_size=world_size, memory=_parse_bytes(memory, "memory"),
                workers=workers or 0, window=window or 0,
                prefetch=prefetch or 0, verify=bool(verify), state=state,
                view=view, whole_chunks=bool(whole_chunks),
                local_world_size=local_world,
                pin_cache=_PIN_AUTO if pin_cache == "auto"
                else _parse_bytes(pin_cache, "pin_cache"))
        except Error as e:
            # a cuda device (the default) on a machine without a GPU: say
            # how to run anyway rather than leave the caller to the docs
            if not device.startswith("cuda") or _core.cuda_available()[0]:
                raise
            hint = Error(f"{e} (device='cpu' streams into host memory, "
                         "device='auto' picks the GPU when there is one)")
            for a in ("code", "exit_code", "reason"):
                if hasattr(e, a):
                    setattr(hint, a, getattr(e, a))
            raise hint from None
        if state is not None:
            self._epochs_done = _json.loads(state)["epoch"]

    def __len__(self):
        return self._l.batches()

    def _next(self):
        r = self._l.next()
        if r is None:
            return None
        epoch, step, index, pad, tensors = r
        b = Batch(tensors)
        b.index = _np.frombuffer(index, dtype=_np.uint64)
        b.pad = _np.frombuffer(pad, dtype=_np.bool_)  # 0 or 1 per sample
        b.epoch, b.step = epoch, step
        return b

    def __iter__(self):
        """The batches of one epoch (the next one, or the one set_epoch
        or a state chose); after `epochs` epochs, none."""
        if self.epochs is not None and self._epochs_done >= self.epochs:
            return
        while True:
            b = self._next()
            if b is None:
                break
            yield b
        self._epochs_done += 1

    def set_epoch(self, epoch):
        """Start epoch `epoch` from its beginning (its order depends on
        seed and epoch); nothing happens if the loader stands there."""
        st = _json.loads(self._l.state())
        fresh = st["nseg"] == 1 and st["segments"][0]["steps"] == 0
        if st["epoch"] == epoch and fresh:
            return
        st.update(epoch=epoch, samples=0, nseg=1,
                  segments=[{"world": self.world_size,
                             "batch": self.batch_size, "steps": 0}])
        self._l.restore(_json.dumps(st))
        self._epochs_done = epoch

    def state_dict(self):
        """Where the epoch stands (plain data; save it with a checkpoint
        and pass it back as Loader(..., state=...))."""
        return {"dlk": _json.loads(self._l.state())}

    def load_state_dict(self, state):
        """Continue from a state_dict() (of any world or batch size)."""
        st = state["dlk"] if "dlk" in state else state
        self._l.restore(_json.dumps(st))
        self._epochs_done = st["epoch"]

    def stats(self):
        """Where time went, as a dict of seconds (summed over the threads
        doing it) and counts: storage_s, decompress_s, h2d_s, gather_s,
        wait_s (the consumer waiting for a batch), first_batch_s,
        gpu_busy_s; io_busy_s (I/O threads loading chunks) and io_cpu_s
        (of that, on or waiting for a CPU: near io_busy_s the loading is
        CPU work, well under it the threads wait on the store), pin_s
        (of that, pinning the page cache for pin_cache, once a chunk) and
        chunks_pinned (the chunks this loader pinned) and chunks_shared
        (those it read where another loader of the same Dataset had
        pinned them: shared, and outside its pin_cache budget);
        chunks_loaded, chunks_verified (each chunk's stored checksum is
        checked once a loader), bytes_loaded, samples, batches,
        peak_buffer_bytes, io_threads."""
        return self._l.stats()

    def close(self):
        """Stop the I/O threads (batches still held stay valid: the loader
        goes once the last of them is freed)."""
        self._l.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
