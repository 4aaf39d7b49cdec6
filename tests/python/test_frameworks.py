"""dlk.Loader driven as the frameworks drive a loader (TAP output), on the
cpu device, without torch: each model below makes the calls that
Lightning 2.x, accelerate 1.x and torch make, in their order, with numpy
where torch would hold tensors.  tests/gpu/frameworks.py runs the real
frameworks (where they are installed).

    python3 tests/python/test_frameworks.py DATASET_URL

DATASET (t500 makes it) has 50 rows; the dlk binary is $DLK."""
import collections
import itertools
import json
import os
import pickle
import subprocess
import sys
import tempfile
import types

import numpy as np

import dlk
import tap
from tap import test

DLK = os.environ["DLK"]
URL = sys.argv[1]
N = len(dlk.open(URL))
HERE = os.path.dirname(os.path.abspath(__file__))


def loader(**kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("batch_size", 7)
    return dlk.Loader(URL, **kw)


def rows(batch):
    """The rows a batch trains on, from its plain keys (what survives a
    framework's batch transfer), or its attributes as the loader gave
    it."""
    if hasattr(batch, "index") and "dlk_index" not in batch:
        idx, pad = batch.index, batch.pad
    else:
        idx, pad = batch["dlk_index"], batch["dlk_pad"]
    return [int(i) for i, p in zip(idx, pad) if not p]


def rows_of(ld):
    return sum((rows(b) for b in ld), [])


# ---- models of the frameworks' calls ----------------------------------

def apply_to_collection(data, fn):
    """lightning_utilities' apply_to_collection, as Lightning's batch
    transfer (transfer_batch_to_device) calls it: a Mapping is rebuilt as
    elem_type(OrderedDict(...)), so attributes of the batch are lost."""
    if isinstance(data, collections.abc.Mapping):
        return type(data)(collections.OrderedDict(
            (k, apply_to_collection(v, fn)) for k, v in data.items()))
    if isinstance(data, list):
        return [apply_to_collection(v, fn) for v in data]
    return fn(data)


def default_convert(data):
    """torch.utils.data default_convert (a DataLoader with
    batch_size=None over an iterable of batches): a Mapping becomes
    elem_type({key: default_convert(value)}); numpy arrays become
    tensors (here: copies)."""
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, np.ndarray):
        return np.array(data)
    return data


def send_to_device(batch):
    """accelerate's send_to_device: type(batch)({k: send(v) ...})."""
    return type(batch)({k: (np.array(v) if isinstance(v, np.ndarray) else v)
                        for k, v in batch.items()})


def lightning_fit(ld, max_epochs, on_batch, limit=None):
    """Lightning's fit loop over a train loader that is not a torch
    DataLoader: _check_dataloader_iterable calls iter() once; setup_data
    takes len() (the limit), loads the loader's state when resuming,
    calls iter() and takes max_batches = len(); each later epoch calls
    iter() once; its _DataFetcher, knowing the length, takes exactly
    max_batches batches (fewer when resuming: `ready` of them were
    taken before) and never asks for the end.  Each batch goes through
    the batch transfer (apply_to_collection).  Returns the state_dict()
    Lightning's checkpoint would hold at the end."""
    iter(ld)                                   # _check_dataloader_iterable
    limit = len(ld) if limit is None else limit
    ready = 0
    if isinstance(on_batch, tuple):            # resuming: (state, ready, fn)
        state, ready, on_batch = on_batch
        ld.load_state_dict(state)
    fetcher = iter(ld)
    max_batches = min(limit, len(ld))
    for epoch in range(max_epochs):
        if epoch > 0:
            fetcher = iter(ld)
            ready = 0
        length = len(ld)                       # _DataFetcher.reset
        fetched = ready
        while ready < max_batches and fetched < length:
            b = next(fetcher)
            apply_to_collection(b, lambda v: v)   # to the model (see 6)
            fetched += 1
            ready += 1
            on_batch(epoch, b)
    return ld.state_dict()


def lightning_validate(ld, runs, on_batch, sanity=2):
    """Lightning's validation: the sanity check takes `sanity` batches and
    leaves the loop; every validation run then calls iter() and its
    _Sequential iterator takes len() batches (the limit), never the end."""
    it = iter(ld)
    for _ in range(sanity):
        next(it)
    for run in range(runs):
        it = iter(ld)
        for _ in range(len(ld)):
            b = next(it)
            apply_to_collection(b, lambda v: v)
            on_batch(run, b)


def gather_for_metrics(per_rank):
    """accelerate's gather_for_metrics for a loader it did not prepare
    (end_of_dataloader is never set): every rank's tensors concatenated,
    nothing dropped."""
    return np.concatenate(per_rank)


def epochs_of(seen):
    out = collections.defaultdict(list)
    for epoch, b in seen:
        out[epoch] += rows(b)
    return out


# ---- 4: epochs -----------------------------------------------------------

@test
def _():
    """Lightning's fit loop (one iter() an epoch, exactly len() batches,
    never the end) gets every epoch whole, in order"""
    ld = loader(seed=3)
    seen = []
    lightning_fit(ld, 3, lambda e, b: seen.append((e, b)))
    ep = epochs_of(seen)
    for e in range(3):
        assert sorted(ep[e]) == list(range(N)), (e, len(ep[e]))
    assert ep[0] != ep[1] != ep[2]


@test
def _():
    """islice(loader, len(loader)) and a break: the next loop is the next
    epoch from its start; len() is what a loop gets"""
    ld = loader(seed=3)
    a = list(itertools.islice(ld, len(ld)))
    b = list(itertools.islice(ld, len(ld)))
    assert len(a) == len(b) == len(ld) == 8
    assert sorted(sum(map(rows, a), [])) == list(range(N))
    assert sorted(sum(map(rows, b), [])) == list(range(N))
    assert {x.epoch for x in a} == {0} and {x.epoch for x in b} == {1}
    for i, x in enumerate(ld):
        if i == 2:
            break
    whole = list(ld)
    assert len(whole) == len(ld) and {x.epoch for x in whole} == {3}
    assert sorted(sum(map(rows, whole), [])) == list(range(N))
    # with epochs=2, exactly-len loops still give two whole epochs
    ld = loader(seed=3, epochs=2)
    got = [list(itertools.islice(ld, len(ld))) for _ in range(3)]
    assert [len(g) for g in got] == [8, 8, 0], [len(g) for g in got]


@test
def _():
    """Lightning's validation (a sanity check of 2 batches, then len()
    batches a run) gets every run whole"""
    seen = []
    lightning_validate(loader(shuffle=False), 3,
                       lambda r, b: seen.append((r, b)))
    ep = epochs_of(seen)
    for r in range(3):
        assert sorted(ep[r]) == list(range(N)), (r, len(ep[r]))


@test
def _():
    """Lightning resuming mid-epoch from the loader's state_dict: the rest
    of the epoch exactly, then whole epochs; a state saved at an epoch's
    end resumes at the next"""
    ld = loader(seed=5)
    first = []

    def take(e, b):
        first.append(b)
        if len(first) == 3:
            raise StopIteration
    try:
        lightning_fit(ld, 1, take)
    except StopIteration:
        pass
    state = json.loads(json.dumps(ld.state_dict()))
    seen = []
    ld2 = loader(seed=5)
    lightning_fit(ld2, 2, (state, 3, lambda e, b: seen.append((e, b))))
    ep = epochs_of(seen)
    done = sum(map(rows, first), [])
    assert sorted(done + ep[0]) == list(range(N)), (len(done), len(ep[0]))
    assert sorted(ep[1]) == list(range(N))
    # saved after the last batch of an epoch, before any end marker
    ld = loader(seed=5)
    st = lightning_fit(ld, 1, lambda e, b: None)
    assert st["dlk"]["epoch"] == 1, st
    seen = []
    lightning_fit(loader(seed=5, state=st), 1, lambda e, b: seen.append((e, b)))
    assert sorted(epochs_of(seen)[0]) == list(range(N))
    assert len(seen) == 8


# ---- 5: the rank --------------------------------------------------------

PLACE = r"""
import dlk, json, sys
l = dlk.Loader(sys.argv[1], device="cpu", batch_size=7)
print(json.dumps([*dlk.launch_env()[:2], sorted(
    int(i) for b in l for i, p in zip(b.index, b.pad) if not p)]))
"""
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
               "NODE_RANK", "GROUP_RANK", "OMPI_COMM_WORLD_RANK",
               "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
               "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
               "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")


def launched(env, code=PLACE, args=()):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code, URL, *args], env=e,
                          capture_output=True, text=True)


def bench_rank(env):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    e.update(env)
    r = subprocess.run([DLK, "bench-stream", URL, "--device", "cpu",
                        "--batch-size", "7", "--json"], env=e,
                       capture_output=True, text=True)
    return r.returncode, json.loads(r.stdout or "{}")


@test
def _():
    """Lightning's DDP launcher (WORLD_SIZE, NODE_RANK, LOCAL_RANK, no
    RANK): each process its own rank, every row once; bench-stream takes
    the same rank"""
    got = []
    for r in range(2):
        env = {"WORLD_SIZE": "2", "NODE_RANK": "0", "LOCAL_RANK": str(r),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
        p = launched(env)
        assert p.returncode == 0, p.stderr
        rank, world, rs = json.loads(p.stdout)
        assert (rank, world) == (r, 2), (rank, world)
        got.append(rs)
        rc, j = bench_rank(env)
        assert rc == 0 and (j["rank"], j["world"]) == (r, 2), (rc, j)
    assert not set(got[0]) & set(got[1])
    assert sorted(got[0] + got[1]) == list(range(N))
    # node 1 of 2, two a node: rank 2 of 4
    env = {"WORLD_SIZE": "4", "NODE_RANK": "1", "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "2"}
    p = launched(env)
    assert p.returncode == 0 and json.loads(p.stdout)[:2] == [2, 4], p.stderr
    assert bench_rank(env)[1]["rank"] == 2
    # an srun that started the launcher: SLURM_PROCID numbers srun's tasks
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "WORLD_SIZE": "2",
           "NODE_RANK": "0", "LOCAL_RANK": "1"}
    assert json.loads(launched(env).stdout)[:2] == [1, 2]
    assert bench_rank(env)[1]["rank"] == 1
    # Slurm and MPI alone as before
    assert json.loads(launched({"SLURM_PROCID": "1", "SLURM_NTASKS": "3"})
                      .stdout)[:2] == [1, 3]
    assert json.loads(launched({"OMPI_COMM_WORLD_RANK": "2",
                                "OMPI_COMM_WORLD_SIZE": "3"}).stdout)[:2] == [2, 3]


@test
def _():
    """WORLD_SIZE above 1 with no rank to be had is refused, naming it
    (Python and bench-stream); a rank given explicitly goes on"""
    for env in ({"WORLD_SIZE": "2"},
                {"WORLD_SIZE": "4", "NODE_RANK": "1", "LOCAL_RANK": "0"}):
        p = launched(env)
        assert p.returncode != 0 and "WORLD_SIZE" in p.stderr and \
            "rank cannot be known" in p.stderr, p.stderr
        rc, j = bench_rank(env)
        assert rc == 2 and "rank cannot be known" in j["error"]["message"], j
    p = launched({"WORLD_SIZE": "2"}, code=r"""
import dlk, sys
l = dlk.Loader(sys.argv[1], device="cpu", batch_size=7, rank=1)
print(l.world_size, sum(len(b.index) for b in l))""")
    assert p.returncode == 0 and p.stdout.split() == ["2", "28"], p.stderr


FAKE_DIST = r"""
import sys, types
td = types.ModuleType("torch.distributed")
td.group = None
td.is_available = lambda: True
td.is_initialized = lambda: td.group is not None
td.get_rank = lambda: td.group[0]
td.get_world_size = lambda: td.group[1]
sys.modules["torch.distributed"] = td
"""


def fake_dist():
    """torch.distributed as the loader asks it: is_available,
    is_initialized, get_rank, get_world_size; `group` set as
    init_process_group would."""
    ns = {}
    exec(FAKE_DIST, ns)
    return ns["td"]


@test
def _():
    """a loader made before torch.distributed's process group (before the
    Trainer) follows the group at len() and iter(): its rank's rows"""
    saved = sys.modules.get("torch.distributed")
    td = fake_dist()
    try:
        ld = loader(seed=2)          # the main process: no launcher yet
        want = sorted(rows_of(loader(seed=2, rank=1, world_size=2)))
        td.group = (1, 2)            # init_process_group(rank 1 of 2)
        assert dlk.launch_env()[:2] == (1, 2)
        assert len(ld) == len(loader(seed=2, rank=1, world_size=2))
        assert sorted(rows_of(ld)) == want
        assert (ld.rank, ld.world_size) == (1, 2)
    finally:
        if saved is None:
            sys.modules.pop("torch.distributed", None)
        else:
            sys.modules["torch.distributed"] = saved


SPAWNED = FAKE_DIST + r"""
import pickle, json
rank = int(sys.argv[2])
ld = pickle.load(open(sys.argv[3], "rb"))   # as mp.spawn's child does
td.group = (rank, 2)                       # then the strategy's init
print(json.dumps(sorted(int(i) for b in ld for i, p in
                        zip(b["dlk_index"], b["dlk_pad"]) if not p)))
"""


@test
def _():
    """a loader pickled to spawned processes (ddp_spawn) opens again in
    each, with that process's rank, its state kept"""
    ld = loader(seed=6)
    it = iter(ld)
    before = sum((rows(next(it)) for _ in range(2)), [])
    got = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "loader.pkl")
        with open(path, "wb") as f:
            pickle.dump(ld, f)
        for r in range(2):
            p = launched({}, code=SPAWNED, args=(str(r), path))
            assert p.returncode == 0, p.stderr
            got.append(json.loads(p.stdout))
    assert not set(got[0]) & set(got[1])
    assert sorted(before + got[0] + got[1]) == list(range(N))
    assert pickle.loads(pickle.dumps(ld)).state_dict() == ld.state_dict()


# ---- 6: batch transfer ---------------------------------------------------

@test
def _():
    """row ids and the padding mask survive Lightning's batch transfer,
    torch's default_convert and accelerate's send_to_device; on one rank
    the last batch is short: exactly the epoch's rows, none twice"""
    for move in (lambda b: apply_to_collection(b, lambda v: v),
                 default_convert, send_to_device):
        got, sizes = [], []
        for b in loader(seed=4):
            m = move(b)
            assert m["dlk_index"].shape[0] == m["dlk_pad"].shape[0] == \
                np.from_dlpack(m["images"]).shape[0]
            assert not m["dlk_pad"].any()
            got += [int(i) for i in m["dlk_index"]]
            sizes.append(len(m["dlk_index"]))
        assert sorted(got) == list(range(N)) and sizes[-1] == N % 7, sizes


@test
def _():
    """over 2 ranks the last batches are padded to full (as
    DistributedSampler pads), flagged in "dlk_pad": gathered across ranks
    (gather_for_metrics) and masked, each row exactly once"""
    per_rank = [[send_to_device(b) for b in loader(seed=4, rank=r,
                                                   world_size=2)]
                for r in range(2)]
    assert len(per_rank[0]) == len(per_rank[1])
    idx, pad = [], []
    for step in range(len(per_rank[0])):
        idx.append(gather_for_metrics([per_rank[r][step]["dlk_index"]
                                       for r in range(2)]))
        pad.append(gather_for_metrics([per_rank[r][step]["dlk_pad"]
                                       for r in range(2)]))
    idx, pad = np.concatenate(idx), np.concatenate(pad)
    assert len(idx) > N and pad.sum() == len(idx) - N
    assert sorted(idx[~pad].tolist()) == list(range(N))


@test
def _():
    """accelerate: prepare() returns a loader that is not a torch
    DataLoader as it is; skip_first_batches(k) starts the next loop k
    batches in, and the loop after it is the next whole epoch"""
    ld = loader(seed=7)
    whole = [rows(b) for b in loader(seed=7)]
    prepared = ld                               # Accelerator._prepare_one
    skipped = prepared.skip_first_batches(3)
    got = [rows(b) for b in skipped]
    assert got == whole[3:], (len(got), len(whole))
    nxt = sum((rows(b) for b in prepared), [])
    assert sorted(nxt) == list(range(N))
    # skipping a whole epoch: an empty loop (its end), then the next
    ld = loader(seed=7)
    assert list(ld.skip_first_batches(len(ld))) == []
    nxt = list(ld)
    assert {b.epoch for b in nxt} == {1} and len(nxt) == 8


_DL_KWARGS = {"batch_size": 1, "shuffle": False, "sampler": None,
              "batch_sampler": None, "num_workers": 0, "collate_fn": None,
              "pin_memory": False, "drop_last": False, "timeout": 0,
              "worker_init_fn": None, "multiprocessing_context": None,
              "generator": None, "prefetch_factor": 2,
              "persistent_workers": False}


def accelerate_skip_first_batches(dataloader, num_batches):
    """accelerate 1.x's skip_first_batches for an object that is not one
    of its DataLoaders: dataset (not an IterableDataset), sampler (not a
    BatchSampler), batch_sampler wrapped in a SkipBatchSampler, the other
    DataLoader arguments read with getattr and their defaults; then torch's
    DataLoader over a map-style dataset with a batch_sampler and
    num_workers=0 (it refuses a prefetch_factor then): for each list of
    the batch sampler, dataset.__getitems__(list), then collate_fn."""
    dataset = dataloader.dataset
    assert dataloader.sampler is None
    inner = dataloader.batch_sampler
    kw = {k: getattr(dataloader, k, v) for k, v in _DL_KWARGS.items()
          if k not in ("batch_size", "shuffle", "sampler", "batch_sampler",
                       "drop_last")}
    assert kw["num_workers"] == 0 and kw["prefetch_factor"] is None, kw

    class SkippingLoader:
        def __len__(self):
            return len(inner) - num_batches

        def __iter__(self):
            for i, keys in enumerate(inner):
                if i >= num_batches:
                    yield kw["collate_fn"](dataset.__getitems__(keys))
    return SkippingLoader()


@test
def _():
    """accelerate's own skip_first_batches(loader, k): the DataLoader it
    builds from the loader's dataset and batch_sampler starts k batches
    in, reading nothing for them; the loop after it is the next epoch"""
    whole = [rows(b) for b in loader(seed=7)]
    ld = loader(seed=7)
    dl = accelerate_skip_first_batches(ld, 3)
    assert len(dl) == len(whole) - 3
    got = [rows(b) for b in dl]
    assert got == whole[3:], (len(got), len(whole))
    assert ld.stats()["batches"] == len(whole) - 3, ld.stats()
    nxt = list(ld)
    assert {b.epoch for b in nxt} == {1} and sorted(rows_of(nxt)) == \
        list(range(N))
    # the whole epoch skipped: nothing, then the epoch after
    dl = accelerate_skip_first_batches(ld, len(ld))
    assert list(dl) == []
    nxt = list(ld)
    assert {b.epoch for b in nxt} == {3}, {b.epoch for b in nxt}
    # a loader restored mid-epoch skips only what it had not taken
    ld = loader(seed=7)
    first = list(itertools.islice(iter(ld), 2))
    st = json.loads(json.dumps(ld.state_dict()))
    ld2 = loader(seed=7, state=st)
    got = [rows(b) for b in accelerate_skip_first_batches(ld2, 3)]
    assert got == whole[3:], (len(got), [rows(b) for b in first])
    # a DataLoader over the Dataset itself still fetches rows by index
    ds = dlk.open(URL)
    got = ds.__getitems__([1, 0])
    assert [sorted(r) for r in got] == [sorted(ds[1]), sorted(ds[0])]
    assert all((got[0][k] == ds[1][k]).all() for k in got[0]
               if isinstance(got[0][k], np.ndarray))


sys.exit(1 if tap.failed else 0)
