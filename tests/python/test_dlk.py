"""The Python package against the CLI, on the cpu device (TAP output).

    python3 tests/python/test_dlk.py DATASET_URL [S3_DATASET_URL [SLOW_ENDPOINT]]

DATASET holds rows of every tensor kind (t500 makes it); the dlk binary
is $DLK; SLOW_ENDPOINT serves the S3 dataset with every chunk read held
back for a minute.  Each check prints `ok - NAME` or `not ok - NAME` with why."""
import gc
import json
import os
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import dlk
import tap
from tap import test

DLK = os.environ["DLK"]
URL = sys.argv[1]
S3_URL = sys.argv[2] if len(sys.argv) > 2 else None
SLOW_ENDPOINT = sys.argv[3] if len(sys.argv) > 3 else None


def cat_npy(url, tensor, row):
    out = subprocess.run([DLK, "cat", url, tensor, str(row), "--npy"],
                         check=True, capture_output=True).stdout
    with tempfile.TemporaryFile() as f:
        f.write(out)
        f.seek(0)
        return np.load(f)


def cpu_loader(src=URL, **kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("batch_size", 7)
    return dlk.Loader(src, **kw)


def epoch_rows(loader):
    """(batches, the non-padding rows in delivery order)"""
    n, rows = 0, []
    for b in loader:
        n += 1
        rows += [int(i) for i, p in zip(b.index, b.pad) if not p]
    return n, rows


ds = dlk.open(URL)
N = len(ds)
KINDS = {t["kind"] for t in ds.tensors}
VARIABLE = {t["name"] for t in ds.tensors if None in t["shape"]}


def as_np(v):
    return [np.from_dlpack(x) for x in v] if isinstance(v, list) \
        else np.from_dlpack(v)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and \
        a.tobytes() == b.tobytes()


@test
def _():
    """the dataset: tensors, rows, commit and log as the CLI has them"""
    ls = json.loads(subprocess.run([DLK, "ls", URL, "--json"], check=True,
                                   capture_output=True).stdout)
    assert [t["name"] for t in ds.tensors] == [t["name"] for t in ls["tensors"]]
    assert {"image", "video", "class_label", "bbox", "text", "generic"} <= KINDS
    assert N == 50 and all(t["samples"] == N for t in ds.tensors)
    log = ds.log()
    assert ds.commit and log[0]["id"] == ds.commit and log[0]["message"] == "first"
    assert ds.log(max=1)[0]["samples"]["images"] == N
    lab = [t for t in ds.tensors if t["kind"] == "class_label"][0]
    assert lab["classes"] == ["a", "b", "c"], lab
    at = dlk.open(URL, at="main")
    assert at.commit == ds.commit and len(at) == N
    assert epoch_rows(cpu_loader(URL, at=ds.commit[:8], shuffle=False))[1] \
        == list(range(N))
    try:
        dlk.open(URL, at="main~5")
        raise AssertionError("no error for main~5")
    except dlk.Error as e:
        assert e.exit_code in (2, 3), e


@test
def _():
    """a view: dlk.open(view=) reads its rows, the Loader streams exactly
    them, shuffled or not, sharded over 3 ranks with equal batches"""
    d = tempfile.mkdtemp()
    v = os.path.join(d, "ds")
    shutil.copytree(URL, v)
    subprocess.run([DLK, "query", v, "row % 4 == 1", "--save-view", "q"],
                   check=True, capture_output=True)
    want = [r for r in range(N) if r % 4 == 1]
    vd = dlk.open(v, view="q")
    assert len(vd) == len(want) and vd.rows.tolist() == want
    assert same(vd[2]["images"], ds[want[2]]["images"])
    assert [x["name"] for x in vd.views] == ["q"]
    assert sorted(epoch_rows(cpu_loader(v, view="q", seed=3))[1]) == want
    assert epoch_rows(cpu_loader(vd, shuffle=False))[1] == want
    parts = [epoch_rows(cpu_loader(v, view="q", rank=r, world_size=3))
             for r in range(3)]
    assert len({p[0] for p in parts}) == 1, parts
    assert sorted(sum((p[1] for p in parts), [])) == want
    try:
        dlk.open(v, view="nope")
        raise AssertionError("no error for a missing view")
    except dlk.Error as e:
        assert "no view 'nope'" in str(e), e
    shutil.rmtree(d)


@test
def _():
    """ds[i] equals `dlk cat --npy` for every tensor, class names given,
    text decoded as `dlk cat` prints it"""
    for row in (0, 49):
        r = ds[row]
        for t in ds.tensors:
            c = cat_npy(URL, t["name"], row)
            assert same(r[t["name"]], c), (t["name"], row)
        assert r["labels_class"] == "abc"[int(r["labels"])]
        text = subprocess.run([DLK, "cat", URL, "text", str(row)], check=True,
                              capture_output=True, text=True).stdout
        shown = re.search(r'^text: "(.*)"$', text, re.M).group(1)
        assert r["text_text"] == shown and re.fullmatch(r"(row \d+)+", shown), \
            (r["text_text"], text)
    assert same(ds[-1]["images"], ds[N - 1]["images"])


@test
def _():
    """loader batches equal `dlk cat --npy` for every tensor kind"""
    seen = set()
    for b in cpu_loader(shuffle=True, seed=3):
        for j, row in enumerate(b.index):
            row = int(row)
            if row in seen or b.pad[j]:
                continue
            seen.add(row)
            if row % 20 != 1:  # most against the library's reader
                ref = {t["name"]: ds.read(t["name"], row) for t in ds.tensors}
            else:              # rows 1, 21, 41 against the CLI
                ref = {t["name"]: cat_npy(URL, t["name"], row)
                       for t in ds.tensors}
            for name in (t["name"] for t in ds.tensors):
                got = np.array(as_np(b[name])[j])
                assert same(got, ref[name]), (name, row)
    assert seen == set(range(N))


@test
def _():
    """numpy takes a batch tensor without a copy"""
    b = next(iter(cpu_loader()))
    t = b["images"]
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr and a.shape == (7,) + ds.tensors[0]["shape"]
    assert t.__dlpack_device__() == (1, 0) and t.device == "cpu"
    # both capsule kinds; one never consumed frees itself
    assert '"dltensor"' in repr(t.__dlpack__())
    assert '"dltensor_versioned"' in repr(t.__dlpack__(max_version=(1, 0)))
    assert isinstance(b["boxes"], list) and len(b["boxes"]) == 7
    assert np.from_dlpack(b["boxes"][0]).shape[1] == 4


@test
def _():
    """len(loader) is the batches delivered; on one rank a last batch is
    short, as a DataLoader's (padded with pad_last=True), over several
    ranks padded to a full batch, flagged in batch.pad and the key "dlk_pad"."""
    l = cpu_loader(shuffle=False)
    n = len(l)
    batches = list(l)
    assert n == len(batches) == 8, (n, len(batches))   # ceil(50 / 7)
    last = batches[-1]
    assert list(last.index) == [49] and not last.pad.any()
    assert np.from_dlpack(last["images"]).shape == (1, 8, 8, 3)
    assert len(last["boxes"]) == 1 and list(last["dlk_index"]) == [49]
    last = list(cpu_loader(shuffle=False, pad_last=True))[-1]
    assert last.pad.sum() == 6 and np.from_dlpack(last["images"]).shape[0] == 7
    for r in range(2):      # 25 rows a rank: 3 full batches and 4 + 3 repeats
        last = list(cpu_loader(shuffle=False, rank=r, world_size=2))[-1]
        assert last["dlk_pad"].sum() == 3 and len(last["dlk_index"]) == 7
    l = cpu_loader(shuffle=False, drop_last=True)
    assert len(l) == 7 == len(list(l))


@test
def _():
    """unshuffled is dataset order; shuffled is a permutation, per seed
    and epoch"""
    assert epoch_rows(cpu_loader(shuffle=False))[1] == list(range(N))
    l = cpu_loader(shuffle=True, seed=5)
    e0 = epoch_rows(l)[1]
    e1 = epoch_rows(l)[1]
    assert sorted(e0) == list(range(N)) == sorted(e1)
    assert e0 != list(range(N)) and e0 != e1
    assert epoch_rows(cpu_loader(shuffle=True, seed=5))[1] == e0
    assert epoch_rows(cpu_loader(shuffle=True, seed=6))[1] != e0
    l = cpu_loader(shuffle=True, seed=5)
    l.set_epoch(1)
    assert epoch_rows(l)[1] == e1


@test
def _():
    """a loop is an epoch; with epochs=E, loops after the E-th are empty"""
    l = cpu_loader(epochs=2, shuffle=True)
    e0, e1 = list(l), list(l)
    assert len(e0) == len(e1) == 8
    assert {b.epoch for b in e0} == {0} and {b.epoch for b in e1} == {1}
    assert list(l) == []


@test
def _():
    """2 and 3 ranks: each row once, equal batch counts"""
    for world in (2, 3):
        counts, rows = [], []
        for r in range(world):
            l = cpu_loader(rank=r, world_size=world, shuffle=True, seed=1)
            n, got = epoch_rows(l)
            counts.append((n, len(l)))
            rows += got
        assert sorted(rows) == list(range(N)), (world, sorted(rows))
        assert len(set(counts)) == 1 and counts[0][0] == counts[0][1], counts


@test
def _():
    """rank and world size come from torchrun, MPI or Slurm variables"""
    code = ("import dlk,sys; l=dlk.Loader(sys.argv[1],device='cpu',"
            "batch_size=7); print(dlk.launch_env(), sorted(int(i) for b in l "
            "for i,p in zip(b.index,b.pad) if not p))")
    for env in ({"RANK": "1", "WORLD_SIZE": "3", "LOCAL_RANK": "1"},
                {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3"},
                {"SLURM_PROCID": "1", "SLURM_NTASKS": "3"}):
        e = {k: v for k, v in os.environ.items()
             if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        e.update(env)
        out = subprocess.run([sys.executable, "-c", code, URL], env=e,
                             check=True, capture_output=True, text=True).stdout
        want = epoch_rows(cpu_loader(rank=1, world_size=3))[1]
        assert out.split(")", 1)[1].strip() == str(sorted(want)), (env, out)
    e = dict(os.environ, WORLD_SIZE="two")
    r = subprocess.run([sys.executable, "-c", code, URL], env=e,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "bad WORLD_SIZE 'two'" in r.stderr, r.stderr


@test
def _():
    """whole_chunks=True reads chunks whole: every row once an epoch, the
    same rows as the default spans of parts"""
    n, rows = epoch_rows(cpu_loader(seed=4, whole_chunks=True))
    assert sorted(rows) == list(range(N)), (n, len(rows))
    assert sorted(epoch_rows(cpu_loader(seed=4))[1]) == sorted(rows)


RESUME = r"""
import dlk, json, sys
url, k, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
world = int(sys.argv[4]) if len(sys.argv) > 4 else 1
rows = []
if k >= 0:      # the first process: k batches, then save the state
    l = dlk.Loader(url, device="cpu", batch_size=7, seed=9)
    it = iter(l)
    for _ in range(k):
        b = next(it)
        rows += [int(i) for i, p in zip(b.index, b.pad) if not p]
    json.dump(l.state_dict(), open(path, "w"))
else:           # a new process (each rank of the new world) resumes
    st = json.load(open(path))
    for r in range(world):
        l = dlk.Loader(url, device="cpu", batch_size=5, seed=9, rank=r,
                       world_size=world, state=st)
        rows += [int(i) for b in l for i, p in zip(b.index, b.pad) if not p]
print(json.dumps(rows))
"""


@test
def _():
    """state resume in a new process (same and another world size): the
    rows equal one uninterrupted epoch"""
    whole = epoch_rows(cpu_loader(seed=9))[1]
    with tempfile.TemporaryDirectory() as d:
        st = os.path.join(d, "state.json")
        for k, world in ((3, 1), (4, 2)):
            run = lambda *a: json.loads(subprocess.run(
                [sys.executable, "-c", RESUME, URL, *map(str, a)], check=True,
                capture_output=True, text=True).stdout)
            first = run(k, st)
            rest = run(-1, st, world)
            assert len(first) == 7 * k
            if world == 1:
                assert first + rest == whole[:len(first)] + rest
            assert sorted(first + rest) == list(range(N)), (k, world)
            assert first == whole[:len(first)]


@test
def _():
    """errors raise dlk.Error with the library's message and exit class"""
    try:
        dlk.open(URL + "-missing")
        raise AssertionError("no error")
    except dlk.Error as e:
        assert "-missing" in str(e) and e.exit_code == 3 and e.code == 2, e
    for kw, want, code in (({"tensors": ["nope"]}, "nope", 2),
                           ({"device": "cuda:0"}, "cuda:0", 13),
                           ({"rank": 3, "world_size": 2}, "rank 3", 1),
                           ({"device": "tpu"}, "bad device 'tpu'", 1),
                           ({"state": '{"epoch": 1}'}, "malformed", 1)):
        try:
            cpu_loader(**kw)
            raise AssertionError(f"no error for {kw}")
        except dlk.Error as e:
            assert want in str(e) and e.code == code and e.exit_code == 3, \
                (kw, str(e), e.code, e.exit_code)
    try:
        cpu_loader(state=cpu_loader(seed=1).state_dict(), seed=2)
        raise AssertionError("no error for another seed's state")
    except dlk.Error as e:
        assert "seed 1" in str(e), str(e)


@test
def _():
    """a held batch never shows later data; buffers given back are reused"""
    l = cpu_loader(shuffle=True, seed=4, batch_size=5)
    held, ptrs = [], []
    for b in l:
        a = np.from_dlpack(b["images"])
        held.append((b.index.copy(), a, a.copy(), b["boxes"],
                     [np.from_dlpack(x).copy() for x in b["boxes"]]))
        ptrs.append(b["images"].data_ptr)
    assert len(set(ptrs)) == len(ptrs)   # every held batch its own memory
    for idx, a, snap, boxes, bsnap in held:
        assert same(a, snap)
        for j, row in enumerate(idx):
            assert same(a[j], ds.read("images", int(row)))
            assert same(np.from_dlpack(boxes[j]), bsnap[j])
    del held, b, a, boxes
    gc.collect()
    # none held now: the next epoch's batches come from those buffers
    again = [b["images"].data_ptr for b in l]
    assert set(again) <= set(ptrs), (again, ptrs)


@test
def _():
    """a batch outlives its loader's close, and the loader then closes"""
    l = cpu_loader(seed=2)
    b = next(iter(l))
    a = np.from_dlpack(b["images"])
    idx = b.index.copy()
    l.close()
    del l, b
    gc.collect()
    for j, row in enumerate(idx):
        assert same(a[j], ds.read("images", int(row)))
    try:
        cpu_loader().close() or next(iter(cpu_loader(seed=1)))
    except dlk.Error:
        raise AssertionError("a fresh loader failed")


def sigint_default():
    """In the child before it runs: SIGINT as a terminal gives it.  A
    shell starts background jobs with SIGINT ignored, and Python then
    never raises KeyboardInterrupt: the Ctrl-C tests would hang for a
    reason that is not the loader's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


INTERRUPT = r"""
import dlk, sys
l = dlk.Loader(sys.argv[1], device="cpu", batch_size=1, shuffle=True)
print("started", flush=True)
n = 0
try:
    while True:
        for b in l:
            n += 1
except KeyboardInterrupt:
    print("interrupted", n > 0, flush=True)
    sys.exit(130)   # the loader is left to the exit (no close: see dlk)
"""


@test
def _():
    """Ctrl-C stops iteration: KeyboardInterrupt, no hang"""
    p = subprocess.Popen([sys.executable, "-c", INTERRUPT, URL],
                         stdout=subprocess.PIPE, text=True,
                         preexec_fn=sigint_default)
    assert p.stdout.readline().strip() == "started"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    try:
        out, _ = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("no exit 20 s after SIGINT")
    assert p.returncode == 130 and "interrupted True" in out, (p.returncode, out)


@test
def _():
    """pin_cache is taken ("auto" or bytes; on the cpu it changes nothing)
    and a bad one is an error naming it"""
    base = epoch_rows(cpu_loader(shuffle=True, seed=5))
    for pc in ("auto", "64M", 1 << 20):
        got = epoch_rows(cpu_loader(shuffle=True, seed=5, pin_cache=pc))
        assert got == base, (pc, got[0], base[0])
    try:
        cpu_loader(pin_cache="lots")
    except ValueError as e:
        assert "pin_cache='lots'" in str(e), str(e)
    else:
        raise AssertionError("pin_cache='lots' was taken")


@test
def _():
    """the default device: a GPU where there is one, else an error that
    says how to run on the cpu"""
    if dlk.cuda_available()[0]:
        loader = dlk.Loader(URL, batch_size=8)
        assert loader.device.startswith("cuda:"), loader.device
        loader.close()
        return
    try:
        dlk.Loader(URL, batch_size=8)
    except dlk.Error as e:
        assert "cuda:" in str(e) and "device='cpu'" in str(e), str(e)
        assert e.exit_code == 3 and e.reason, (e.exit_code, e.reason)
    else:
        raise AssertionError("a cuda loader opened without a GPU")


@test
def _():
    """the default GPU is the local rank modulo the GPUs the process sees:
    a launcher that gives each process one GPU (CUDA_VISIBLE_DEVICES, as
    Slurm's --gpus-per-task does) has every process on cuda:0"""
    code = ("import dlk,sys; print(dlk.local_gpu()); "
            "l=dlk.Loader(sys.argv[1],batch_size=8,device='auto'); "
            "print(l.device, sum(len(b.index) for b in l))")
    e = dict(os.environ, LOCAL_RANK="3", LOCAL_WORLD_SIZE="4")
    if dlk.cuda_available()[0]:
        e["CUDA_VISIBLE_DEVICES"] = "0"
    r = subprocess.run([sys.executable, "-c", code, URL], env=e,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    gpu, dev = r.stdout.split("\n")[:2]
    if dlk.cuda_available()[0]:
        assert gpu == "0" and dev.startswith("cuda:0 "), r.stdout
    else:
        assert gpu == "None" and dev.startswith("cpu "), r.stdout


# an embedding dataset for the resident index: 2000 x 24 f32 (with ties)
# and a score, several chunks
EMB_DIR = tempfile.mkdtemp(prefix="dlk-index.")
rng = np.random.default_rng(501)
EX = rng.standard_normal((2000, 24)).astype(np.float32)
EX[1500] = EX[9]
ES = rng.random(2000).astype(np.float32)
EQ = rng.standard_normal((3, 24)).astype(np.float32)
EQ[1] = EX[9]
os.makedirs(os.path.join(EMB_DIR, "src"))
np.save(os.path.join(EMB_DIR, "src", "0.emb.npy"), EX)
np.save(os.path.join(EMB_DIR, "src", "0.score.npy"), ES)
EMB = os.path.join(EMB_DIR, "ds")
subprocess.run([DLK, "create", EMB, "--tensor", "emb:f32:24", "--tensor",
                "score:f32", "--chunk-size", "16K"], check=True,
               capture_output=True)
subprocess.run([DLK, "ingest", EMB, "from-dir", os.path.join(EMB_DIR, "src"),
                "--no-key", "--quiet"], check=True, capture_output=True)
subprocess.run([DLK, "query", EMB, "score < 0.6", "--save-view", "low"],
               check=True, capture_output=True)


def query_near(q, k, metric, *extra):
    f = os.path.join(EMB_DIR, "q.npy")
    np.save(f, q)
    return json.loads(subprocess.run(
        [DLK, "query", EMB, *extra, "--near", f"emb={f}", "--k", str(k),
         "--metric", metric, "--device", "cpu", "--json"], check=True,
        capture_output=True).stdout)


@test
def _():
    """Dataset.index on the cpu: each query's rows and scores are dlk
    query --near's, bit for bit, for each metric, one query or several,
    with a filter and a view; len(), nbytes, close() and with"""
    eds = dlk.open(EMB)
    with eds.index("emb", device="cpu", threads=3) as ix:
        assert len(ix) == 2000 and ix.dim == 24 and ix.device == "cpu"
        assert ix.nbytes == 2000 * 24 * 4
        for metric in ("cosine", "l2", "ip"):
            rows, scores = ix.search(EQ, k=6, metric=metric)
            assert rows.shape == (3, 6) and scores.shape == (3, 6)
            for i in range(3):
                want = query_near(EQ[i], 6, metric)
                assert rows[i].tolist() == want["rows"], (metric, i)
                assert scores[i].tolist() == want["scores"], (metric, i)
            r1, s1 = ix.search(EQ[2].tolist(), k=6, metric=metric)
            assert r1.tolist() == rows[2].tolist()
            assert s1.tolist() == scores[2].tolist()
        # ties broken by the lower row: 9 before 1500
        assert ix.search(EQ[1], k=2)[0].tolist() == [9, 1500]
    try:
        ix.search(EQ)
        raise AssertionError("a search after close()")
    except ValueError:
        pass
    ix = eds.index("emb", where="score > 0.3", device="cpu")
    keep = ES > 0.3
    assert len(ix) == int(keep.sum())
    rows, scores = ix.search(EQ, k=5, metric="ip")
    for i in range(3):
        want = query_near(EQ[i], 5, "ip", "score > 0.3")
        assert rows[i].tolist() == want["rows"]
        assert scores[i].tolist() == want["scores"]
        g = EX.astype(np.float64) @ EQ[i].astype(np.float64)
        g[~keep] = -np.inf
        assert rows[i].tolist() == np.argsort(-g, kind="stable")[:5].tolist()
    ix.close()
    vix = dlk.open(EMB, view="low").index("emb", where="score > 0.2",
                                            device="cpu")
    assert len(vix) == int(((ES < 0.6) & (ES > 0.2)).sum())
    rows, scores = vix.search(EQ[0], k=2000, metric="l2")
    want = query_near(EQ[0], 2000, "l2", "score > 0.2", "--view", "low")
    assert rows.tolist() == want["rows"] and len(rows) == len(vix)
    assert scores.tolist() == want["scores"]


@test
def _():
    """Dataset.index errors: not an embedding, a bad expression, no such
    tensor, queries of the wrong length, an unknown metric or device; on
    cuda the CPU's rows and scores, or an error without a GPU"""
    eds = dlk.open(EMB)
    for kw, code in ((dict(tensor="score"), 3), (dict(tensor="nope"), 3),
                     (dict(tensor="emb", where="score >"), 3)):
        try:
            eds.index(device="cpu", **kw)
            raise AssertionError(f"no error for {kw}")
        except dlk.Error as e:
            assert e.exit_code == code, (kw, e)
    try:
        eds.index("emb", device="tpu")
        raise AssertionError("no error for device tpu")
    except ValueError:
        pass
    ix = eds.index("emb", device="cpu")
    for q, kw in ((np.zeros(5), {}), (np.zeros((2, 3, 24)), {}),
                  (EQ, dict(metric="hamming")), (EQ, dict(k=0))):
        try:
            ix.search(q, **kw)
            raise AssertionError(f"no error for {np.shape(q)} {kw}")
        except ValueError:
            pass
    if dlk.cuda_available()[0]:
        with eds.index("emb", device="cuda") as gix:
            assert gix.device == "cuda" and len(gix) == 2000
            for metric in ("cosine", "l2", "ip"):
                g, c = gix.search(EQ, 9, metric), ix.search(EQ, 9, metric)
                assert g[0].tolist() == c[0].tolist(), metric
                assert g[1].tolist() == c[1].tolist(), metric
    else:
        try:
            eds.index("emb", device="cuda")
            raise AssertionError("no error for cuda without a GPU")
        except dlk.Error as e:
            assert "cannot search on a CUDA GPU" in str(e), e
        assert eds.index("emb").device == "cpu"
    shutil.rmtree(EMB_DIR)


@test
def _():
    """Loader.stats(): two epochs' samples and batches, every chunk's
    checksum checked once (none with verify=False), the I/O threads' CPU
    time within their busy time; local_world_size shares the cores"""
    for verify in (True, False):
        with cpu_loader(epochs=2, workers=2, verify=verify) as ld:
            e1, e2 = epoch_rows(ld), epoch_rows(ld)
            n, rows = e1[0] + e2[0], e1[1] + e2[1]
            st = ld.stats()
        assert st["io_threads"] == 2 and st["batches"] == n, (st, n)
        assert st["samples"] >= len(rows) == 2 * N, (st, len(rows))
        assert 0 < st["io_cpu_s"] <= st["io_busy_s"] + 1e-6, st
        assert st["pin_s"] == 0, st  # the cpu pins nothing
        assert st["chunks_loaded"] >= 1 and st["bytes_loaded"] > 0, st
        if verify:
            assert 1 <= st["chunks_verified"] <= st["chunks_loaded"], st
        else:
            assert st["chunks_verified"] == 0, st
    # the ranks of a host share its cores: four of them, a quarter each
    with cpu_loader(local_world_size=4) as ld:
        assert ld.stats()["io_threads"] == max(1, os.cpu_count() // 4)
    try:
        cpu_loader(local_world_size=0)
        raise AssertionError("no error for local_world_size=0")
    except ValueError as e:
        assert "local_world_size" in str(e), e


if S3_URL and SLOW_ENDPOINT:
    @test
    def _():
        """Ctrl-C while the loader waits for a slow read: KeyboardInterrupt
        at once, and the process exits"""
        p = subprocess.Popen([sys.executable, "-c", INTERRUPT, S3_URL],
                             stdout=subprocess.PIPE, text=True,
                             preexec_fn=sigint_default,
                             env=dict(os.environ, AWS_ENDPOINT_URL=SLOW_ENDPOINT))
        assert p.stdout.readline().strip() == "started"
        time.sleep(1.0)   # in the wait for chunks held back a minute
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        try:
            out, _ = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError("no exit 15 s after SIGINT")
        assert p.returncode == 130 and "interrupted False" in out, \
            (p.returncode, out)
        assert time.time() - t0 < 5, time.time() - t0

if S3_URL:
    @test
    def _():
        """an s3:// dataset (moto): the same rows, values and order"""
        s3 = dlk.open(S3_URL)
        assert len(s3) == N and s3.commit
        a = epoch_rows(cpu_loader(S3_URL, seed=3))[1]
        assert a == epoch_rows(cpu_loader(seed=3))[1]
        for b in cpu_loader(S3_URL, seed=3, batch_size=16):
            for j, row in enumerate(b.index):
                assert same(np.from_dlpack(b["images"])[j],
                            ds.read("images", int(row)))
                assert same(np.from_dlpack(b["clip"][j]),
                            ds.read("clip", int(row)))


jax, why = None, "no jax (python3 -m pip install 'jax[cpu]')"
if "libasan" in os.environ.get("LD_PRELOAD", ""):
    # jaxlib's C++ exceptions abort inside the AddressSanitizer runtime
    # (t500's sanitizer pass preloads it); the normal pass checks jax
    why = "jaxlib cannot run under the AddressSanitizer runtime (checked in the normal pass)"
else:
    # four cpu devices: dlk.jax shards a batch over them as over the GPUs
    # of a host
    # (the cpu only, where jax has a GPU too: tests/gpu/jax_cuda.py, run
    # below in a process of its own, takes the GPUs)
    os.environ.setdefault("XLA_FLAGS",
                          "--xla_force_host_platform_device_count=4")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import jax.numpy as jnp
        import dlk.jax
    except ImportError:
        jax = None
jax_why = why
if jax is None:
    print(f"ok - jax takes batches through DLPack # SKIP {why}")
    print(f"ok - dlk.jax shards batches over the devices # SKIP {why}")
    print(f"ok - dlk.jax across two processes # SKIP {why}")
else:
    @test
    def _():
        """jax takes batches through DLPack"""
        for b in cpu_loader(seed=8, tensors=["images", "emb", "labels"]):
            x = jax.dlpack.from_dlpack(b["images"])
            assert x.shape == (len(b.index), 8, 8, 3) and x.dtype == jnp.uint8
            for j, row in enumerate(b.index):
                assert (np.asarray(x[j]) == ds.read("images", int(row))).all()
                assert np.asarray(jax.dlpack.from_dlpack(b["emb"])[j]).tobytes() \
                    == ds.read("emb", int(row)).tobytes()

    @test
    def _():
        """dlk.jax: a batch a jax.Array sharded over the 4 devices, each
        device's rows those of rank k of 4 (as torchrun's), every row once
        an epoch, values as stored; a state resumes it"""
        devs = jax.devices()
        assert len(devs) == 4, devs
        kw = dict(batch_size=3, seed=5, tensors=["images", "emb", "labels"])
        ld = dlk.jax.loader(URL, **kw)
        ranks = [cpu_loader(URL, rank=k, world_size=4, **kw) for k in range(4)]
        assert len(ld) == len(ranks[0]) == -(-N // 12), (len(ld), N)
        seen = []
        for b, *per in zip(ld, *ranks):
            x = b["images"]
            assert isinstance(x, jax.Array) and x.shape == (12, 8, 8, 3), x.shape
            assert x.sharding == ld.sharding and b["emb"].sharding == ld.sharding
            for sh in x.addressable_shards:
                k = devs.index(sh.device)
                assert sh.index[0] == slice(3 * k, 3 * k + 3), (k, sh.index)
                assert b.index[3 * k:3 * k + 3].tolist() == per[k].index.tolist()
                for j, row in enumerate(per[k].index):
                    assert (np.asarray(sh.data[j]) == ds.read("images", int(row))).all()
            e = np.asarray(b["emb"])
            for j, row in enumerate(b.index):
                assert e[j].tobytes() == ds.read("emb", int(row)).tobytes()
            seen += [int(r) for r, p in zip(b.index, b.pad) if not p]
        assert sorted(seen) == list(range(N)), seen
        # two batches, a checkpoint, then a new loader from it
        ld = dlk.jax.loader(URL, **kw)
        it = iter(ld)
        first = [next(it) for _ in range(2)]
        st = ld.stats()
        assert len(st) == 4 and all(s["io_threads"] == max(1, os.cpu_count() // 4)
                                    for s in st), st  # the host's cores, shared
        rest = dlk.jax.loader(URL, state=ld.state_dict(), **kw)
        rows = [int(r) for b in first + list(rest) for r, p in zip(b.index, b.pad)
                if not p]
        assert sorted(rows) == list(range(N)), rows
        # by default every fixed-shape tensor, the variable ones left out
        b = next(iter(dlk.jax.loader(URL, batch_size=3)))
        assert set(b) == {t["name"] for t in ds.tensors if None not in t["shape"]}, set(b)
        assert VARIABLE and not VARIABLE & set(b), VARIABLE
        # the batch of a whole step, shared equally by the devices
        g = dlk.jax.loader(URL, global_batch_size=8, seed=5, tensors=["images"])
        assert (g.batch_size, g.global_batch_size) == (2, 8), g.batch_size
        b = next(iter(g))
        assert b["images"].shape[0] == 8 and \
            {s.data.shape[0] for s in b["images"].addressable_shards} == {2}
        assert dlk.jax.loader(URL, tensors=["images"]).global_batch_size == 1024
        for bad, why in ((dict(tensors=["images", sorted(VARIABLE)[0]]), "varies in shape"),
                         (dict(rank=1), "rank= is decided by the devices"),
                         (dict(global_batch_size=10), "global_batch_size=10 is not a "
                          "positive multiple of the 4 devices"),
                         (dict(global_batch_size=8), "not both")):
            try:
                dlk.jax.loader(URL, **{**kw, **bad})
                raise AssertionError(f"no error for {bad}")
            except ValueError as e:
                assert why in str(e), e

    JAX_PROC = r"""
import json, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax
jax.distributed.initialize(sys.argv[1], num_processes=2,
                           process_id=int(sys.argv[2]))
import dlk, dlk.jax
ld = dlk.jax.loader(sys.argv[3], batch_size=2, seed=4, tensors=["images"])
out = {"local": [ld.devices.index(d) for d in ld.local_devices], "rows": []}
for b in ld:
    x = b["images"]
    assert x.shape[0] == 8 and len(x.addressable_shards) == 2, x.shape
    for sh in x.addressable_shards:
        k = ld.devices.index(sh.device)
        assert sh.index[0] == slice(2 * k, 2 * k + 2), (k, sh.index)
    out["rows"] += [int(r) for r, p in zip(b.index, b.pad) if not p]
print(json.dumps(out))
"""

    @test
    def _():
        """dlk.jax across two processes (jax.distributed on loopback, two
        devices each): each holds its own devices' rows, together every
        row once"""
        import socket
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            addr = "127.0.0.1:%d" % so.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        env["JAX_PLATFORMS"] = "cpu"
        ps = [subprocess.Popen([sys.executable, "-c", JAX_PROC, addr, str(i), URL],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env) for i in range(2)]
        outs = []
        for p in ps:
            o, e = p.communicate(timeout=120)
            assert p.returncode == 0, e[-2000:]
            outs.append(json.loads(o.strip().splitlines()[-1]))
        assert [o["local"] for o in outs] == [[0, 1], [2, 3]], outs
        a, b = outs[0]["rows"], outs[1]["rows"]
        assert not set(a) & set(b) and sorted(a + b) == list(range(N)), (a, b)

tf, why = None, "no tensorflow (optional: python3 -m pip install tensorflow-cpu)"
if "libasan" in os.environ.get("LD_PRELOAD", ""):
    why = "tensorflow cannot run under the AddressSanitizer runtime (checked in the normal pass)"
else:
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
    except ImportError:
        pass
if tf is None:
    print(f"ok - tensorflow takes batches through DLPack # SKIP {why}")
else:
    @test
    def _():
        """tensorflow takes batches through DLPack"""
        for b in cpu_loader(seed=9, tensors=["images", "emb", "labels"]):
            x = tf.experimental.dlpack.from_dlpack(b["images"].__dlpack__())
            assert tuple(x.shape) == (7, 8, 8, 3) and x.dtype == tf.uint8
            e = tf.experimental.dlpack.from_dlpack(b["emb"].__dlpack__())
            for j, row in enumerate(b.index):
                assert (x[j].numpy() == ds.read("images", int(row))).all()
                assert e[j].numpy().tobytes() == ds.read("emb", int(row)).tobytes()

try:
    import torch
    have_torch = torch.cuda.is_available()
    why = "no CUDA device" if not have_torch else ""
except ImportError:
    have_torch, why = False, "no torch (python3 -m pip install torch)"
if not dlk.cuda_available()[0]:
    have_torch, why = False, "libdlk: " + dlk.cuda_available()[1]
if have_torch:
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable,
                        os.path.join(here, "..", "gpu", "torch_cuda.py"), URL])
    print(("ok" if r.returncode == 0 else "not ok") +
          " - dlk.torch on cuda:0 (tests/gpu/torch_cuda.py)")
    tap.failed += r.returncode != 0
else:
    print(f"ok - dlk.torch on cuda:0 # SKIP {why}")

# dlk.jax on the GPUs, in a process of its own (this one keeps jax on the
# cpu); the script exits 77 where jax has no GPU backend
if jax is None:
    print(f"ok - dlk.jax on the GPUs # SKIP {jax_why}")
elif not dlk.cuda_available()[0]:
    print(f"ok - dlk.jax on the GPUs # SKIP libdlk: {dlk.cuda_available()[1]}")
else:
    here = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items()
           if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    r = subprocess.run([sys.executable,
                        os.path.join(here, "..", "gpu", "jax_cuda.py"), URL],
                       env=env)
    if r.returncode == 77:
        print("ok - dlk.jax on the GPUs # SKIP jax has no GPU backend "
              "(jax[cpu])")
    else:
        print(("ok" if r.returncode == 0 else "not ok") +
              " - dlk.jax on the GPUs (tests/gpu/jax_cuda.py)")
        tap.failed += r.returncode != 0

sys.exit(1 if tap.failed else 0)
