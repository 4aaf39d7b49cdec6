#!/usr/bin/env python3
"""Benchmark: dlk query against its baselines, measured in the same run.

  tests/bench/query_bench.py filter [ROWS] [DIR]
      a scalar filter ("score > 0.5") over ROWS rows (default 10 M) of a
      local dataset, against reading the same tensor's chunk files from
      the page cache (read() into one buffer, one thread).
      Target: dlk >= 50% of the read's speed.
  tests/bench/query_bench.py topk [ROWS] [DIM] [DIR]
      exact top-10 over ROWS x DIM f32 embeddings (default 1 M x 512),
      against numpy's brute force over the same array in memory
      (X @ q with its BLAS, then argpartition).
      Target: dlk within 2x of numpy (<= 2x its time) on the same machine.
  tests/bench/query_bench.py topk-gpu [ROWS] [DIM] [DIR]
      the same top-10 on the CPU and on the GPU, in one run: numpy's
      brute force (CPU BLAS), torch on the GPU when torch can use one
      (X @ q + topk: with the host-to-GPU copy of X from a numpy array
      in host memory, and with X already on the GPU), dlk query
      --device cpu and --device cuda (the chunks in the page cache), and
      dlk's fixed cost on the GPU (one row scored: the CUDA start-up).
      Each figure is the best of 3 wall times; dlk's are its --json
      "seconds" (the search in the process, CUDA's start-up included)
      and the whole process's.  The rows of each are checked against
      numpy's, and --device cuda's rows and scores against --device cpu's.

  tests/bench/query_bench.py topk-resident [ROWS] [DIM] [DIR]
      many queries in one process: the same top-10 by numpy's brute
      force per query (X @ q + argpartition, X in memory) against dlk's
      resident index (Dataset.index of the Python package) on the CPU
      and on the GPU (when the package and a GPU are there): the
      one-time cost of opening each index (reading the rows, checksums
      checked; on the GPU CUDA's start-up and the copy), then the best
      and median of 20 queries one at a time after one to warm up, and
      20 in one call; torch with X already on the GPU, for reference;
      and `dlk query --near emb=Q.npy` of 20 queries in one process (its
      "load_seconds" and "seconds").  Every query's
      rows are checked against numpy's, and the GPU's rows and scores
      against the CPU's.  `import dlk` must find the package
      (PYTHONPATH, python/README.md).

Each prints its figures beside its baseline, warm page cache.  DLK names the binary (default build/dlk); the dataset is made
in DIR (default a new folder under /tmp) and left there.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DLK = os.environ.get("DLK", os.path.join(ROOT, "build", "dlk"))


def dlk(*args):
    out = subprocess.run([DLK, *args], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out) if "--json" in args else out


def machine():
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) / 1048576
    return f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {mem:.0f} GiB"


def best_of(n, fn):
    return min(fn() for _ in range(n))


def read_files(files):
    """Seconds to read the files into one reused buffer, one thread."""
    buf = bytearray(max(os.path.getsize(f) for f in files))
    mv = memoryview(buf)
    t0 = time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.readinto(mv):
                pass
    return time.perf_counter() - t0


def make(d, tensors, arrays):
    ds = os.path.join(d, "ds")
    if os.path.exists(os.path.join(ds, "dlk.json")):
        return ds
    src = os.path.join(d, "src")
    os.makedirs(src, exist_ok=True)
    for name, a in arrays.items():
        np.save(os.path.join(src, f"0.{name}.npy"), a)
    args = []
    for t in tensors:
        args += ["--tensor", t]
    dlk("create", ds, *args)
    t0 = time.perf_counter()
    dlk("ingest", ds, "from-dir", src, "--no-key", "--quiet")
    print(f"ingest: {time.perf_counter() - t0:.1f} s")
    return ds


def bench_filter(rows, d):
    rng = np.random.default_rng(1)
    ds = make(d, ["score:f32", "width:i32"],
              {"score": rng.random(rows, dtype=np.float32),
               "width": rng.integers(0, 1000, rows).astype(np.int32)})
    ls = dlk("ls", ds, "--json")
    t = [x for x in ls["tensors"] if x["name"] == "score"][0]
    files = sorted(glob.glob(os.path.join(ds, "chunks", "score", "*")))
    nbytes = sum(os.path.getsize(f) for f in files)
    assert nbytes == t["stored_bytes"]
    read_files(files)  # warm the page cache
    base = best_of(3, lambda: read_files(files))

    def q(*extra):
        return best_of(3, lambda: dlk("query", ds, "score > 0.5", "--count",
                                      "--json", *extra)["seconds"])
    print(f"machine: {machine()}")
    print(f"filter 'score > 0.5' over {rows} rows: the tensor is "
          f"{nbytes / 1e6:.1f} MB in {len(files)} chunks")
    print(f"  baseline read() from the page cache, 1 thread: "
          f"{nbytes / base / 1e9:.2f} GB/s ({base * 1e3:.1f} ms)")
    for label, extra in (("dlk query (default threads)", ()),
                         ("dlk query --threads 1", ("--threads", "1")),
                         ("dlk query --no-verify", ("--no-verify",))):
        s = q(*extra)
        print(f"  {label}: {nbytes / s / 1e9:.2f} GB/s ({s * 1e3:.1f} ms), "
              f"{base / s * 100:.0f}% of the read")
    count = dlk("query", ds, "score > 0.5", "--count", "--json")["count"]
    want = int((np.load(os.path.join(d, "src", "0.score.npy")) > 0.5).sum())
    print(f"  rows matched: {count} (numpy: {want})")
    assert count == want


def bench_topk(rows, dim, d):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((rows, dim), dtype=np.float32)
    ds = make(d, [f"emb:f32:{dim}"], {"emb": X})
    q = rng.standard_normal(dim, dtype=np.float32)
    qf = os.path.join(d, "q.npy")
    np.save(qf, q)
    k = 10

    def numpy_topk():
        t0 = time.perf_counter()
        g = X @ q
        idx = np.argpartition(-g, k)[:k]
        idx = idx[np.argsort(-g[idx])]
        return time.perf_counter() - t0, idx
    numpy_topk()
    base = min(numpy_topk()[0] for _ in range(3))
    want = numpy_topk()[1].tolist()
    files = glob.glob(os.path.join(ds, "chunks", "emb", "*"))
    read_files(files)  # warm the page cache
    print(f"machine: {machine()}")
    print(f"top-{k} over {rows} x {dim} f32 ({X.nbytes / 1e9:.2f} GB)")
    print(f"  baseline numpy X @ q + argpartition (array in memory): "
          f"{base * 1e3:.1f} ms ({X.nbytes / base / 1e9:.2f} GB/s)")
    for label, extra in (("dlk query --metric ip", ("--metric", "ip")),
                         ("dlk query --metric ip --no-verify",
                          ("--metric", "ip", "--no-verify")),
                         ("dlk query --metric cosine", ("--metric", "cosine"))):
        def run():
            return dlk("query", ds, "--near", f"emb={qf}", "--k", str(k),
                       "--json", "--device", "cpu", *extra)
        r = run()
        s = min(run()["seconds"] for _ in range(3))
        print(f"  {label}: {s * 1e3:.1f} ms ({X.nbytes / s / 1e9:.2f} GB/s), "
              f"{s / base:.2f}x numpy's time")
        if "ip" in extra:
            assert r["rows"] == want, (r["rows"], want)
    print("  rows equal numpy's: yes")
    print("  (dlk on the CPU; topk-gpu measures the GPU)")


def wall(fn):
    t0 = time.perf_counter()
    r = fn()
    return time.perf_counter() - t0, r


def torch_gpu():
    try:
        import torch
    except ImportError:
        return None, "torch is not importable"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA GPU"
    return torch, None


def bench_topk_gpu(rows, dim, d):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((rows, dim), dtype=np.float32)
    ds = make(d, [f"emb:f32:{dim}"], {"emb": X})
    q = rng.standard_normal(dim, dtype=np.float32)
    qf = os.path.join(d, "q.npy")
    np.save(qf, q)
    k = 10
    files = glob.glob(os.path.join(ds, "chunks", "emb", "*"))
    read_files(files)  # warm the page cache
    print(f"machine: {machine()}")
    print(f"top-{k} by inner product over {rows} x {dim} f32 "
          f"({X.nbytes / 1e9:.2f} GB); best of 3 wall times")

    def line(label, s, extra=""):
        print(f"  {label}: {s * 1e3:.1f} ms ({X.nbytes / s / 1e9:.2f} GB/s)"
              f"{extra}")

    def numpy_topk():
        g = X @ q
        idx = np.argpartition(-g, k)[:k]
        return idx[np.argsort(-g[idx])]
    numpy_topk()
    base = min(wall(numpy_topk)[0] for _ in range(3))
    want = numpy_topk().tolist()
    line("numpy X @ q + argpartition (CPU BLAS, X in memory)", base)

    torch, why = torch_gpu()
    if torch is None:
        print(f"  torch on the GPU: not measured ({why})")
    else:
        qd = torch.from_numpy(q).cuda()

        def with_copy():
            Xd = torch.from_numpy(X).cuda()
            v, i = torch.topk(Xd @ qd, k)
            torch.cuda.synchronize()
            return i.cpu()
        Xd = torch.from_numpy(X).cuda()

        def on_gpu():
            v, i = torch.topk(Xd @ qd, k)
            torch.cuda.synchronize()
            return i.cpu()
        with_copy(), on_gpu()  # CUDA's start-up and the kernels' first load
        s = min(wall(with_copy)[0] for _ in range(3))
        line("torch, copy of X to the GPU (pageable) + X @ q + topk", s,
             " [CUDA start-up not counted]")
        s = min(wall(on_gpu)[0] for _ in range(3))
        line("torch, X already on the GPU: X @ q + topk", s,
             " [no copy counted]")
        print(f"  torch's rows equal numpy's: {on_gpu().tolist() == want}")
        del Xd
        torch.cuda.empty_cache()

    def dlk_run(*extra, expr=()):
        t, r = wall(lambda: dlk("query", ds, *expr, "--near", f"emb={qf}",
                                "--k", str(k), "--metric", "ip", "--json",
                                *extra))
        return r["seconds"], t, r
    res = {}
    for dev in ("cpu", "cuda"):
        probe = subprocess.run([DLK, "query", ds, "row < 1", "--near",
                                f"emb={qf}", "--device", dev],
                               capture_output=True, text=True)
        if probe.returncode:
            print(f"  dlk query --device {dev}: not measured "
                  f"({probe.stderr.strip()})")
            continue
        runs = [dlk_run("--device", dev) for _ in range(4)][1:]
        if any(r[2].get("device") != dev for r in runs):
            print(f"  dlk --device {dev}: ran on {runs[0][2].get('device')}")
        s, t = min(r[0] for r in runs), min(r[1] for r in runs)
        res[dev] = (s, runs[0][2])
        line(f"dlk query --device {dev}", s,
             f", {s / base:.2f}x numpy's time; the process: {t * 1e3:.1f} ms")
        assert runs[0][2]["rows"] == want, (dev, runs[0][2]["rows"], want)
    if "cuda" in res:
        cpu, gpu = res["cpu"][1], res["cuda"][1]
        print(f"  dlk cuda = dlk cpu (rows and scores): "
              f"{(cpu['rows'], cpu['scores']) == (gpu['rows'], gpu['scores'])}")
        one = [dlk_run("--device", "cuda", expr=("row < 1",)) for _ in range(3)]
        print(f"  dlk --device cuda, one row (the fixed cost: CUDA start-up): "
              f"{min(r[0] for r in one) * 1e3:.1f} ms")
        print(f"  --device cuda / --device cpu: "
              f"{res['cuda'][0] / res['cpu'][0]:.2f}x the time")
    print("  rows equal numpy's: yes")


def bench_topk_resident(rows, dim, d):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((rows, dim), dtype=np.float32)
    ds = make(d, [f"emb:f32:{dim}"], {"emb": X})
    nq, k = 20, 10
    Q = rng.standard_normal((nq + 1, dim), dtype=np.float32)
    qf = os.path.join(d, "queries.npy")
    np.save(qf, Q[1:])
    files = glob.glob(os.path.join(ds, "chunks", "emb", "*"))
    read_files(files)  # warm the page cache
    print(f"machine: {machine()}")
    print(f"top-{k} by inner product over {rows} x {dim} f32 "
          f"({X.nbytes / 1e9:.2f} GB), {nq} queries after one to warm up")

    def numpy_topk(q):
        g = X @ q
        idx = np.argpartition(-g, k)[:k]
        return idx[np.argsort(-g[idx])]
    numpy_topk(Q[0])
    base, want = [], []
    for q in Q[1:]:
        t, r = wall(lambda: numpy_topk(q))
        base.append(t)
        want.append(r.tolist())
    b = min(base)
    print(f"  numpy X @ q + argpartition (X in memory), a query: best "
          f"{b * 1e3:.2f} ms, median {np.median(base) * 1e3:.2f} ms")

    torch, why = torch_gpu()
    if torch is None:
        print(f"  torch, X on the GPU: not measured ({why})")
    else:
        Xd = torch.from_numpy(X).cuda()

        def on_gpu(q):
            v, i = torch.topk(Xd @ torch.from_numpy(q).cuda(), k)
            return i.cpu()
        on_gpu(Q[0])
        tt = [wall(lambda: on_gpu(q))[0] for q in Q[1:]]
        same = all(on_gpu(q).tolist() == w for q, w in zip(Q[1:], want))
        print(f"  torch, X already on the GPU: q to the GPU, X @ q, topk, "
              f"rows back: best {min(tt) * 1e3:.2f} ms, median "
              f"{np.median(tt) * 1e3:.2f} ms; rows equal numpy's: {same}")
        del Xd
        torch.cuda.empty_cache()

    try:
        import dlk as pydlk
    except ImportError as e:
        print(f"  dlk's resident index: not measured (import dlk: {e}; see "
              f"python/README.md)")
        pydlk = None
    got = {}
    for dev in ("cpu", "cuda") if pydlk else ():
        if dev == "cuda" and not pydlk.cuda_available()[0]:
            print(f"  dlk index on cuda: not measured "
                  f"({pydlk.cuda_available()[1]})")
            continue
        t_open, ix = wall(lambda: pydlk.open(ds).index("emb", device=dev))
        if ix.device != dev:
            print(f"  dlk index on {dev}: opened on {ix.device}")
            continue
        ix.search(Q[0], k, "ip")
        times, res = [], []
        for i, q in enumerate(Q[1:]):
            t, r = wall(lambda: ix.search(q, k, "ip"))
            times.append(t)
            res.append((r[0].tolist(), r[1].tolist()))
            assert res[-1][0] == want[i], (dev, i, res[-1][0], want[i])
        t_all, r_all = wall(lambda: ix.search(Q[1:], k, "ip"))
        assert r_all[0].tolist() == [r for r, _ in res]
        got[dev] = res
        s = min(times)
        print(f"  dlk index on {dev} ({ix.nbytes / 1e9:.2f} GB resident): "
              f"open {t_open * 1e3:.1f} ms once; a query: best "
              f"{s * 1e3:.2f} ms, median {np.median(times) * 1e3:.2f} ms, "
              f"{s / b:.3f}x numpy's time; {nq} in one call: "
              f"{t_all / nq * 1e3:.2f} ms a query")
        print(f"    queries to repay the open against numpy: "
              f"{t_open / (b - s):.0f}" if s < b else
              "    never repays the open against numpy")
        ix.close()
        del ix
    if "cpu" in got and "cuda" in got:
        print(f"  dlk index cuda = cpu (rows and scores): "
              f"{got['cpu'] == got['cuda']}")
        assert got["cpu"] == got["cuda"]
    for dev in ("cpu", "cuda"):
        p = subprocess.run([DLK, "query", ds, "--near", f"emb={qf}", "--k",
                            str(k), "--metric", "ip", "--device", dev,
                            "--json"], capture_output=True, text=True)
        if p.returncode:
            print(f"  dlk query --device {dev} of {nq} queries: not measured "
                  f"({p.stderr.strip()})")
            continue
        r = json.loads(p.stdout)
        assert [x["rows"] for x in r["results"]] == want, dev
        print(f"  dlk query --near emb=Q.npy ({nq} queries) --device {dev}: "
              f"{r['seconds'] * 1e3:.1f} ms in all, {r['load_seconds'] * 1e3:.1f}"
              f" ms of it the load, {(r['seconds'] - r['load_seconds']) / nq * 1e3:.2f}"
              f" ms a query")
    print("  rows equal numpy's: yes")


def main():
    modes = ("filter", "topk", "topk-gpu", "topk-resident")
    if len(sys.argv) < 2 or sys.argv[1] not in modes:
        print(__doc__)
        sys.exit(2)
    if sys.argv[1] == "filter":
        rows = int(float(sys.argv[2])) if len(sys.argv) > 2 else 10_000_000
        d = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="dlk-qbench.")
        bench_filter(rows, d)
    else:
        rows = int(float(sys.argv[2])) if len(sys.argv) > 2 else 1_000_000
        dim = int(sys.argv[3]) if len(sys.argv) > 3 else 512
        d = sys.argv[4] if len(sys.argv) > 4 else tempfile.mkdtemp(prefix="dlk-qbench.")
        {"topk": bench_topk, "topk-gpu": bench_topk_gpu,
         "topk-resident": bench_topk_resident}[sys.argv[1]](rows, dim, d)
    print(f"dataset kept in {d}")


if __name__ == "__main__":
    main()
