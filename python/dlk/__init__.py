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
import os as _os
import sys as _sys
import warnings as _warnings

import numpy as _np

from . import _core
from ._core import Error, Tensor

__all__ = ["open", "Dataset", "Index", "Loader", "Batch", "Tensor", "Error",
           "BadReadWarning", "INDEX_KEY", "PAD_KEY", "SOURCE_KEY",
           "launch_env", "local_gpu", "cuda_available", "ingest_parquet",
           "__version__"]
__version__ = _core.version()
# at exit, loaders still open are not closed: a close would wait for the
# storage reads in flight (after a Ctrl-C during a slow read, say)
_atexit.register(_core._at_exit)

# dlk dtype names -> numpy (bf16 has no numpy type: its raw 16 bits)
_NP = {"u8": _np.uint8, "i8": _np.int8, "u16": _np.uint16, "i16": _np.int16,
       "u32": _np.uint32, "i32": _np.int32, "u64": _np.uint64,
       "i64": _np.int64, "f16": _np.float16, "bf16": _np.uint16,
       "f32": _np.float32, "f64": _np.float64, "bool": _np.bool_}


def _torch_dist():
    """(rank, world size) of torch.distributed's process group when one
    is up (Lightning, accelerate and torchrun scripts start one), else
    None; torch is not imported for it."""
    td = _sys.modules.get("torch.distributed")
    if td is None or not td.is_available() or not td.is_initialized():
        return None
    return td.get_rank(), td.get_world_size()


def _placement(rank=None, world_size=None):
    """(rank, world_size, local_rank, local_world_size): the given ones,
    else torch.distributed's when its process group is up, else the
    launcher's (dlk_launch_env: a WORLD_SIZE above 1 whose rank cannot be
    known is an error unless the rank comes from elsewhere)."""
    dist = _torch_dist()
    need = rank is None and dist is None
    r, w, local, local_world = _core.launch_env(need)
    if dist is not None:
        r, w = dist
    if rank is not None:
        r = rank
    if world_size is not None:
        w = world_size
    return r, w, local, local_world


def ingest_parquet(url, source, **kw):
    """Ingest Parquet tables (a file, or a directory of them) into the
    dataset at url through the library's ingest: dlk.parquet.ingest_parquet
    (needs pyarrow)."""
    from .parquet import ingest_parquet as ingest
    return ingest(url, source, **kw)


def launch_env():
    """(rank, world_size, local_rank) as the loader takes them by default:
    torch.distributed's rank and world size when its process group is up,
    else as torchrun, Lightning's DDP launcher, MPI or Slurm set them (the
    variables `dlk bench-stream` reads); (0, 1, 0) without.  A WORLD_SIZE
    above 1 with no way to know the rank raises dlk.Error."""
    return _placement()[:3]


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


class BatchRef:
    """An entry of a loader's batch_sampler: one batch of the loader,
    read by fetch() (dlk.torch.Loader.batch_sampler makes them)."""

    def fetch(self):
        raise NotImplementedError


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

    def __getitems__(self, keys):
        """[self[k] for k in keys], as a torch DataLoader over this
        Dataset fetches a batch of rows; a key may also be an entry of a
        dlk.torch.Loader's batch_sampler, which stands for one batch of
        that loader (how a DataLoader that accelerate's
        skip_first_batches builds over the loader reads it)."""
        return [k.fetch() if isinstance(k, BatchRef) else self[k]
                for k in keys]

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


INDEX_KEY = "dlk_index"
PAD_KEY = "dlk_pad"
SOURCE_KEY = "dlk_source"  # a mix's: each sample's source


class Batch(dict):
    """One batch: {tensor name: dlk.Tensor} (variable-shape tensors: a
    list with one dlk.Tensor per sample), plus two plain keys that a
    framework rebuilding the dict keeps (Lightning's batch transfer,
    accelerate's send_to_device, torch's default_convert):

      "dlk_index"  numpy u64 array: the dataset row of each sample
      "dlk_pad"    numpy bool array: True where a sample repeats as
                   padding (the last batch of an epoch over several
                   ranks, unless drop_last; see Loader's pad_last)
      "dlk_source" numpy u16 array, from a mix only: the source each
                   sample came from (its place in the Loader's list)

    and the same as attributes (.index, .pad, .source: None but from a
    mix), with .epoch and .step,
    on the batch as the loader gives it.  The memory stays valid as long
    as any of its tensors (or anything a framework made from them with
    from_dlpack) is alive."""
    __slots__ = ("index", "pad", "source", "epoch", "step")


_PIN_AUTO = (1 << 64) - 1  # DLK_PIN_CACHE_AUTO


class BadReadWarning(UserWarning):
    """A read that failed (a damaged part, a missing chunk) whose rows a
    Loader with on_bad="skip" replaced; the details are in
    Loader.bad_reads."""


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


def _cache_opts(cache_dir, cache_limit):
    """The chunk cache's options, their defaults from DLK_CACHE_DIR and
    DLK_CACHE_LIMIT (read where the loader opens: a pickled copy takes
    the settings of the host it opens on)."""
    if cache_dir is None:
        cache_dir = _os.environ.get("DLK_CACHE_DIR") or None
    if cache_limit is None:
        cache_limit = _os.environ.get("DLK_CACHE_LIMIT") or None
        name = "DLK_CACHE_LIMIT"
    else:
        name = "cache_limit"
    return dict(cache_dir=_os.fspath(cache_dir) if cache_dir else None,
                cache_limit=_parse_bytes(cache_limit, name))


class _Epoch:
    """One loop over a Loader: the batches of one epoch, as iter() of a
    torch DataLoader gives them.  len() is the epoch's batches."""

    def __init__(self, loader, n, done=False):
        self._loader = loader
        self._n = n
        self.taken = 0
        self.done = done

    def __iter__(self):
        return self

    def __len__(self):
        return self._n

    def __next__(self):
        if self.done:
            raise StopIteration
        ld = self._loader
        if ld._it is not self:
            # its epoch was ended (or moved) by a later iter(), set_epoch
            # or load_state_dict: its batches now belong to another loop
            raise RuntimeError("dlk.Loader: this loop's epoch was ended by "
                               "a later iter(loader), set_epoch or "
                               "load_state_dict")
        b = ld._next()
        if b is None:
            self.done = True
            ld._it = None
            ld._warn_cache()  # a disk that filled during the epoch
            raise StopIteration
        self.taken += 1
        return b


def _own(st):
    """A state's own epoch and segments: a mix's, or the loader's."""
    return st["mix"] if "mix" in st else st


def _mix_sources(items, at):
    """A mix's sources as (Dataset, weight, view) from (url_or_ds, weight)
    or (url_or_ds, weight, view)."""
    if at is not None:
        raise ValueError("at= is for one URL; open each source's Dataset "
                         "at its commit")
    out = []
    for k, it in enumerate(items):
        if not isinstance(it, (list, tuple)) or len(it) not in (2, 3):
            raise ValueError(f"source {k}: {it!r} is not (url_or_ds, "
                             "weight) or (url_or_ds, weight, view)")
        src, w = it[0], it[1]
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise ValueError(f"source {k}: weight {w!r} is not a number")
        ds = src if isinstance(src, Dataset) else Dataset(src)
        view = it[2] if len(it) == 3 else ds.view
        out.append((ds, float(w), view))
    if not out:
        raise ValueError("no sources to mix")
    return out


def _one(batches):
    """A DataLoader's collate_fn over batch_sampler entries: each entry
    fetched one whole batch already."""
    return batches[0]


class _Ref(BatchRef):
    def __init__(self, run, i):
        self._run, self._i = run, i

    def fetch(self):
        return self._run.fetch(self._i)


class _Run:
    """One pass over a loader's batch_sampler: the entries a consumer
    passed over (accelerate's SkipBatchSampler) are batches the loader
    skips, reading nothing for them; the first entry fetched starts the
    loader's next loop that many batches into its epoch."""

    def __init__(self, loader):
        self._l = loader
        self._it = None
        self.done = False

    def _start(self, i):
        ld = self._l
        ld._leave_loop()
        ld._it = None
        own = _own(ld._state())
        # entries count from the epoch's start; a restored loader has
        # taken some already, and those are not skipped twice
        taken = sum(g["steps"] for g in own["segments"])
        if i > taken:
            ld.skip_first_batches(i - taken)
        self._it = iter(ld)

    def fetch(self, i):
        if self._it is None:
            self._start(i)
        b = next(self._it, None)
        if b is None:
            self.done = True
            raise StopIteration  # ends the DataLoader's loop
        return b

    def finish(self, n):
        """Every entry passed over, none fetched: the epoch was skipped
        whole, and the loop after it is the next epoch's."""
        if self._it is None and n:
            self._start(n)
            for _ in self._it:
                pass


class _Steps:
    """A Loader as a DataLoader's batch_sampler: one entry for
    each batch of the epoch the next loop reads, from the epoch's start
    (len(loader) of them)."""

    def __init__(self, loader):
        self._l = loader

    def __len__(self):
        return len(self._l)

    def __iter__(self):
        n = len(self._l)
        run = _Run(self._l)
        for i in range(n):
            if run.done:
                return
            yield [_Ref(run, i)]
        run.finish(n)


class Loader:
    """Shuffled, sharded, prefetched batches of a dataset.

    url_or_ds   a URL or a dlk.Dataset; or a list of sources to mix,
                each (url_or_ds, weight) or (url_or_ds, weight, view):
                every batch holds each source's share of its samples
                (weight / sum of weights, within one sample over any run
                of batches), interleaved; each source streams and
                shuffles as a Loader of its own would and starts its next
                epoch where it runs out (dlk_loader_open_mix in dlk.h).
                The tensors must have the same dtype and shape in every
                source; batch["dlk_source"] (and batch.source) names
                each sample's source, batch.index its row there
    epoch_size  a mix's epoch in samples, all ranks together (default:
                the sources' rows summed)
    batch_size  samples per batch
    shuffle, seed   the order (the same on every rank for a seed)
    tensors     names to load (default all)
    device      "cuda" (cuda:LOCAL_RANK, modulo the GPUs this process
                sees: dlk.local_gpu()), "cuda:N", "cpu", or "auto" (cuda
                when a GPU is there, else cpu)
    epochs      each `for batch in loader` (each iter()) runs one epoch;
                with E, nothing is read ahead past the E-th, and loops
                after it are empty
    drop_last   drop the samples that do not fill a last batch
    pad_last    None (default): over one rank the last batch is short,
                as a DataLoader's; over several it is padded to a full
                batch with repeats, flagged in "dlk_pad", so that every
                rank steps equally (as DistributedSampler pads).  True:
                padded on one rank too (fixed shapes, for a jitted step)
    rank, world_size  default: torch.distributed's when its process group
                is up (checked again at each iter() and len(), so a
                loader made before a Trainer or a spawn follows it), else
                the launcher's (torchrun, Lightning's DDP launcher, MPI,
                Slurm: dlk.launch_env())
    local_world_size  the ranks on this host that share its cores and
                memory (default: the launcher's LOCAL_WORLD_SIZE, or 1);
                a process that runs several loaders, one a GPU, counts
                them all (dlk.jax does)
    at          a commit to read (with a URL)
    view        stream only this view's rows (default: the Dataset's view,
                or every row); of chunks with part checksums only the
                parts holding them are read (dlk-bench-stream(1) --view)
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
    on_bad      "fail" (default): a chunk, or a span of its parts, that
                cannot be read whole and verified (a checksum mismatch, a
                missing object, an I/O or network error after the
                retries) raises dlk.Error.  "skip": the batch positions
                of its rows get other rows of the same batch (the epoch's
                next readable row when the batch has none): every rank
                keeps its batch count and size.  Of a span, only a part
                whose checksum fails loses its rows.  Each such read warns
                (dlk.BadReadWarning) and is appended to loader.bad_reads
                (dicts of tensor, object, part0, part1, first_row, rows,
                epoch, code, why); stats() counts reads_bad and
                rows_replaced (dlk-bench-stream(1) --on-bad)
    max_bad     with "skip", the most rows replaced in one epoch on this
                rank; one more raises dlk.Error.  Default: 0.1% of the
                rank's rows in the epoch, at least the largest chunk's
    cache_dir   a folder of this node where the chunks of a remote dataset
                are kept once fetched, shared by its ranks (each chunk
                fetched once a node), reused across epochs and runs
                (default: $DLK_CACHE_DIR; "" for none); a folder that
                cannot be written streams as without it, with one
                warnings.warn (dlk-bench-stream(1) --cache-dir)
    cache_limit bytes (int, or "200G") the folder holds at most, least
                recently used chunks evicted (default: $DLK_CACHE_LIMIT,
                else its file system's free space less an eighth)
    augment     per-sample augmentation of the image (or video) tensor as
                each batch is gathered, on the loader's device: a preset,
                "imagenet-train" (RandomResizedCrop 224, scale 0.08:1,
                ratio 3/4:4/3, horizontal flip, ImageNet mean/std, bf16
                NCHW) or "imagenet-eval" (shorter side 256, center crop
                224, the same normalisation), or fields such as
                "crop=224,scale=0.08:1,ratio=0.75:1.3333,flip=h,
                jitter=0.4:0.4:0.4,normalize=imagenet,dtype=bf16,
                layout=nchw" (python/README.md).  A sample's crop and
                flip depend on (seed, epoch, row) only: a re-run or a
                resumed epoch gets the same pixels
    augment_tensor  the tensor augment applies to (default: the first of
                kind image or video)

    len(loader) is the number of batches this rank gets in the epoch under
    way or next, as a DataLoader counts them: after a mid-epoch resume
    too the whole epoch's (a loop then gets those not yet taken; a
    framework that resumes counts the ones it took, as Lightning does).
    Reading starts as the Loader is made: make it before the model, and
    building the model fills the first window.  A Loader pickles as its
    options and state (ddp_spawn, multiprocessing): the copy opens again
    where it is unpickled, at its first use."""

    # what code written for a DataLoader reads to rebuild one
    # (accelerate's skip_first_batches): see batch_sampler
    sampler = None
    num_workers = 0
    prefetch_factor = None
    pin_memory = False
    collate_fn = staticmethod(_one)

    @property
    def batch_sampler(self):
        """One entry a batch of the epoch the next loop reads, from the
        epoch's start (len(loader) of them), each reading nothing until
        fetched: a torch DataLoader(loader.dataset, batch_sampler=...,
        collate_fn=loader.collate_fn) gives the loader's batches, and
        entries passed over unfetched are batches skipped unread (how
        accelerate's skip_first_batches(loader, k) works on a Loader)."""
        return _Steps(self)

    def __init__(self, url_or_ds, batch_size=256, shuffle=True, seed=0,
                 tensors=None, device="cuda", epochs=None, drop_last=False,
                 rank=None, world_size=None, at=None, memory=None,
                 workers=None, state=None, window=None, prefetch=None,
                 verify=True, view=None, whole_chunks=False,
                 pin_cache=None, local_world_size=None, pad_last=None,
                 on_bad="fail", max_bad=None, cache_dir=None,
                 cache_limit=None, epoch_size=None, augment=None,
                 augment_tensor=None):
        self.sources = None
        if isinstance(url_or_ds, (list, tuple)):
            self.sources = _mix_sources(url_or_ds, at)
            self.dataset = self.sources[0][0]
        elif isinstance(url_or_ds, Dataset):
            if at is not None and at != url_or_ds.at:
                raise ValueError("at= is for a URL; open the Dataset at it")
            self.dataset = url_or_ds
            view = url_or_ds.view if view is None else view
        else:
            self.dataset = Dataset(url_or_ds, at)
        if local_world_size is not None and int(local_world_size) < 1:
            raise ValueError(f"local_world_size {local_world_size}: "
                             "at least 1")
        for t in (tensors if tensors is not None
                  else [t["name"] for t in self.dataset.tensors]):
            if t in (INDEX_KEY, PAD_KEY, SOURCE_KEY):
                raise ValueError(f"tensor '{t}' has the name of a batch's "
                                 "row ids or padding mask: leave it out "
                                 "of tensors=")
        if on_bad not in ("fail", "skip"):
            raise ValueError(f"on_bad={on_bad!r}: \"fail\" or \"skip\"")
        if max_bad is not None and (not isinstance(max_bad, int) or
                                    isinstance(max_bad, bool) or max_bad < 1):
            raise ValueError(f"max_bad={max_bad!r}: a count of rows, at "
                             "least 1")
        if isinstance(state, dict):
            state = _json.dumps(state["dlk"] if "dlk" in state else state)
        # what a pickled copy needs to open again elsewhere
        self._opts = dict(
            batch_size=batch_size, shuffle=shuffle, seed=seed,
            tensors=list(tensors) if tensors is not None else None,
            device=device, epochs=epochs, drop_last=drop_last, rank=rank,
            world_size=world_size, memory=memory, workers=workers,
            window=window, prefetch=prefetch, verify=verify, view=view,
            whole_chunks=whole_chunks, pin_cache=pin_cache,
            local_world_size=local_world_size, pad_last=pad_last,
            on_bad=on_bad, max_bad=max_bad,
            cache_dir=cache_dir, cache_limit=cache_limit,
            epoch_size=epoch_size, augment=augment,
            augment_tensor=augment_tensor)
        self._cache_warned = False
        self.batch_size = batch_size
        self.epochs = epochs
        self.bad_reads = []
        self._l = None
        self._it = None
        self._open(state, restored=state is not None)

    def _open(self, state, restored=False):
        o = self._opts
        rank, world, local_rank, local_world = _placement(o["rank"],
                                                          o["world_size"])
        if o["local_world_size"] is not None:
            local_world = int(o["local_world_size"])
        if state is not None:
            st = _json.loads(state)
            own = _own(st)
            if own.get("nseg") == 1 and own["segments"][0]["steps"] == 0:
                # an epoch not begun is this layout's, not the one it
                # was saved in (a copy unpickled in a spawned rank, a
                # loader that moves to torch.distributed's group)
                own["segments"][0].update(world=world,
                                          batch=o["batch_size"])
                state = _json.dumps(st)
        device = o["device"]
        if device == "auto":
            device = "cuda" if _core.cuda_available()[0] else "cpu"
        if device == "cuda":
            gpu = _core.local_gpu()
            # without a GPU the device fails to open, with its reason
            device = f"cuda:{local_rank if gpu is None else gpu}"
        try:
            src = (self.dataset._ds if self.sources is None else
                   tuple((d._ds, float(w), v) for d, w, v in self.sources))
            l = _core.Loader(
                src, device, batch_size=o["batch_size"],
                shuffle=bool(o["shuffle"]), seed=o["seed"],
                tensors=o["tensors"], epochs=o["epochs"] or 0,
                drop_last=bool(o["drop_last"]), rank=rank, world_size=world,
                memory=_parse_bytes(o["memory"], "memory"),
                workers=o["workers"] or 0, window=o["window"] or 0,
                prefetch=o["prefetch"] or 0, verify=bool(o["verify"]),
                state=state, view=o["view"],
                whole_chunks=bool(o["whole_chunks"]),
                local_world_size=local_world,
                pin_cache=_PIN_AUTO if o["pin_cache"] == "auto"
                else _parse_bytes(o["pin_cache"], "pin_cache"),
                # a pickle of an older version has neither
                on_bad=o.get("on_bad", "fail") == "skip",
                max_bad=o.get("max_bad") or 0,
                epoch_size=o.get("epoch_size") or 0,
                augment=o.get("augment"),
                augment_tensor=o.get("augment_tensor"),
                **_cache_opts(o.get("cache_dir"), o.get("cache_limit")))
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
        old, self._l = self._l, l
        if old is not None:
            old.close()
        self.device, self.rank, self.world_size = device, rank, world
        self._warn_cache()
        # every batch of a restored epoch already taken: what is left of
        # it is its end, and the next loop is the next epoch
        if restored:
            self._drain_restored()

    def _warn_cache(self):
        """The chunk cache's warning (a folder that cannot be written, a
        full disk: chunks stream from the store), once a Loader."""
        w = self._l.stats()["cache_warning"]
        if w and not self._cache_warned:
            self._cache_warned = True
            _warnings.warn(w, RuntimeWarning, stacklevel=3)

    def _core(self):
        """The library's loader, placed where this process now stands:
        a loader made before torch.distributed's process group was up
        (before a Trainer, or unpickled in a spawned process) moves to the
        group's rank and world size, its place in the epoch kept."""
        o = self._opts
        if self._l is None:
            self._open(self._pending, restored=True)
            self._pending = None
        elif o["rank"] is None or o["world_size"] is None:
            rank, world = _placement(o["rank"], o["world_size"])[:2]
            if (rank, world) != (self.rank, self.world_size):
                self._open(self._l.state())
        return self._l

    def _state(self):
        return _json.loads(self._l.state())

    def _left(self, st=None):
        """Batches of this rank not yet taken in the epoch under way."""
        st = _own(st or self._state())
        return self._l.batches() - st["segments"][-1]["steps"]

    def _epoch_len(self):
        """The epoch's batches as a DataLoader counts them: those taken in
        earlier segments of a resumed epoch, and this segment's."""
        st = _own(self._state())
        return self._l.batches() + sum(g["steps"]
                                       for g in st["segments"][:-1])

    def __len__(self):
        self._core()
        it = self._it
        if it is not None and it.taken and not it.done:
            return len(it)
        return self._epoch_len()

    def _next(self):
        o = self._opts
        trim = o["pad_last"] is None and self.world_size == 1
        try:
            r = self._l.next(trim)
        finally:
            self._tell_bad()
        if r is None:
            return None
        epoch, step, index, pad, tensors, sources = r
        b = Batch(tensors)
        b.index = _np.frombuffer(index, dtype=_np.uint64)
        b.pad = _np.frombuffer(pad, dtype=_np.bool_)  # 0 or 1 per sample
        b[INDEX_KEY], b[PAD_KEY] = b.index, b.pad
        b.source = None
        if sources is not None:
            b.source = _np.frombuffer(sources, dtype=_np.uint16)
            b[SOURCE_KEY] = b.source
        b.epoch, b.step = epoch, step
        return b

    def _tell_bad(self):
        """The reads whose rows the last next() replaced (on_bad="skip"):
        kept in bad_reads, each a warning."""
        for b in self._l.take_bad():
            self.bad_reads.append(b)
            parts = (f" part {b['part0']}" if b["part1"] == b["part0"] + 1
                     else f" parts {b['part0']}-{b['part1'] - 1}"
                     if b["part1"] else "")
            _warnings.warn(
                f"dlk: epoch {b['epoch']}: rows {b['first_row']}-"
                f"{b['first_row'] + b['rows'] - 1} of '{b['object']}'"
                f"{parts} replaced: {b['why']}", BadReadWarning,
                stacklevel=4)

    def _leave_loop(self):
        """Open the loader, and end the epoch of a loop that stopped
        early (some batches taken, not its end)."""
        self._core()
        old = self._it
        if old is not None and old.taken and not old.done:
            self._end_epoch()

    def _end_epoch(self):
        """Leave the epoch a loop stopped in (a break, or a framework that
        takes len() batches and never asks for the end): the next loop
        starts the next epoch from its start, as a DataLoader's does."""
        st = self._state()
        if self._left(st) == 0 and self._l.next() is None:
            return  # the end was all that was left
        self._restart(st, _own(st)["epoch"] + 1)

    def _restart(self, st, epoch):
        # of a mix, its own epoch: the sources stream on where they are
        _own(st).update(epoch=epoch, samples=0, nseg=1,
                        segments=[{"world": self.world_size,
                                   "batch": self.batch_size, "steps": 0}])
        self._l.restore(_json.dumps(st))

    def __iter__(self):
        """The batches of one epoch: the next one (after a loop that
        stopped early, the one after it: a break or a framework's exactly
        len() batches end the epoch), or where set_epoch or a state put
        the loader; after `epochs` epochs, none.  As with a DataLoader,
        one loop at a time: a later iter() ends the earlier one's epoch."""
        self._leave_loop()
        if (self.epochs is not None and
                _own(self._state())["epoch"] >= self.epochs):
            self._it = _Epoch(self, 0, done=True)
        else:
            self._it = _Epoch(self, self._epoch_len())
        return self._it

    def skip_first_batches(self, num_batches):
        """Start the next loop num_batches batches into the epoch it would
        start, reading nothing for them, and return the loader: what
        accelerate's skip_first_batches does for a DataLoader (it builds a
        DataLoader over loader.dataset, and cannot take a dlk.Loader).
        The loop after it is the next whole epoch."""
        self._leave_loop()
        self._it = None
        st = self._state()
        seg = _own(st)["segments"][-1]
        seg["steps"] = min(seg["steps"] + int(num_batches),
                           seg["steps"] + self._left(st))
        # skipped to the end: the next loop is the empty rest of the
        # epoch (its end), not the next epoch
        self._l.restore(_json.dumps(st))
        return self

    def set_epoch(self, epoch):
        """Start epoch `epoch` from its beginning (its order depends on
        seed and epoch); nothing happens if the loader stands there."""
        self._core()
        self._it = None
        st = self._state()
        own = _own(st)
        fresh = own["nseg"] == 1 and own["segments"][0]["steps"] == 0
        if own["epoch"] == epoch and fresh:
            return
        self._restart(st, epoch)

    def state_dict(self):
        """Where the epoch stands (plain data; save it with a checkpoint
        and pass it back as Loader(..., state=...)).  Once every batch of
        an epoch is taken, the next epoch's start."""
        if self._l is None:
            return {"dlk": _json.loads(self._pending)}
        st = self._state()
        own = _own(st)
        if self._left(st) == 0 and own["segments"][-1]["steps"]:
            own.update(epoch=own["epoch"] + 1, samples=0, nseg=1,
                       segments=[{"world": self.world_size,
                                  "batch": self.batch_size, "steps": 0}])
        return {"dlk": st}

    def load_state_dict(self, state):
        """Continue from a state_dict() (of any world or batch size): the
        next loop starts there."""
        st = state["dlk"] if "dlk" in state else state
        if self._l is None:
            self._pending = _json.dumps(st)
            return
        self._it = None
        self._l.restore(_json.dumps(st))
        self._drain_restored()

    def _drain_restored(self):
        # every batch of a restored epoch already taken (a state saved
        # after the last batch, before the loop asked for the end): what
        # is left of it is its end, and the next loop is the next epoch
        if (self._left() == 0 and
                _own(self._state())["segments"][-1]["steps"]):
            if self._l.next() is not None:
                raise RuntimeError("dlk.Loader: a restored epoch with no "
                                   "batch left gave one")

    def __getstate__(self):
        """Options and state, not the open loader: a copy made in another
        process (ddp_spawn, multiprocessing) opens again there, at its
        first use, with that process's rank unless one was given."""
        ds = self.dataset
        mix = None if self.sources is None else [
            (d.url, d.at, d.view, w, v) for d, w, v in self.sources]
        return {"url": ds.url, "at": ds.at, "ds_view": ds.view,
                "mix": mix, "opts": self._opts,
                "state": self.state_dict()["dlk"]}

    def __setstate__(self, d):
        self.sources = None
        if d.get("mix"):
            self.sources = [(Dataset(u, a, dv), w, v)
                            for u, a, dv, w, v in d["mix"]]
            self.dataset = self.sources[0][0]
        else:
            self.dataset = Dataset(d["url"], d["at"], d["ds_view"])
        self._opts = d["opts"]
        self.batch_size = self._opts["batch_size"]
        self.epochs = self._opts["epochs"]
        self.bad_reads = []
        self._l = None
        self._it = None
        self._pending = _json.dumps(d["state"])
        self.device = self.rank = self.world_size = None
        self._cache_warned = False

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
        peak_buffer_bytes, io_threads; reads_bad and rows_replaced
        (on_bad="skip": failed reads whose rows were replaced, and the
        batch positions given other rows, every epoch's); with cache_dir,
        cache_on, then cache_hits (reads from copies), cache_fetched
        (chunks this loader fetched and kept), cache_evicted,
        cache_dropped (damaged copies removed and fetched again),
        cache_limit and cache_warning (why nothing is written, or "")."""
        return self._core().stats()

    def close(self):
        """Stop the I/O threads (batches still held stay valid: the loader
        goes once the last of them is freed)."""
        if self._l is not None:
            self._l.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
