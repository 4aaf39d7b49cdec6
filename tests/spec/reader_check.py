"""reader_check.py WHAT ARGS...: checks of a dataset by tests/spec/reader.py
(formats/dlk-v1.md alone); exits non-zero with the difference."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader  # noqa: E402


def head(ds):
    with open(os.path.join(ds, "staging/manifest.json"), "rb") as f:
        return json.loads(f.read())


def tensor(m, name):
    return next(t for t in m["tensors"] if t["name"] == name)


def read(ds, key):
    with open(os.path.join(ds, key), "rb") as f:
        return f.read()


def samples(ds, t):
    """Every sample of a variable-shape u8 tensor, from its chunks."""
    assert not t.get("segments"), "inline chunk lists only"
    out = []
    for e in t["chunks"]:
        out += reader.samples_of(read(ds, "chunks/%s/%s" % (t["name"], e[0])))
    assert len(out) == t["samples"]
    return out


def key_tensors(ds):
    m = head(ds)
    names = [t["name"] for t in m["tensors"]]
    assert names[-2:] == ["key", "key_version"], names
    for n in ("key", "key_version"):
        t = tensor(m, n)
        got = (t["dtype"], t["kind"], t["shape"], t["codec"], t.get("level"))
        assert got == ("u8", "text", [-1], "zstd", 3), (n, got)


def key_runs(ds):
    m = head(ds)
    keys = samples(ds, tensor(m, "key"))
    vers = samples(ds, tensor(m, "key_version"))
    want = sorted((reader.xxh64(k), reader.version_hash(v))
                  for k, v in zip(keys, vers))
    got, first = [], 0
    for r in m["key_runs"]:
        b = read(ds, r["object"])
        assert reader.xxh128hex(b) == r["object"].rsplit("/", 1)[1]
        f, pairs = reader.key_run(b)
        assert f == first and len(pairs) == r["rows"], (f, first)
        first += r["rows"]
        got += pairs
    assert sorted(got) == want, (len(got), len(want))


def commit(ds):
    cid = read(ds, "refs/heads/main").decode().rstrip("\n")
    b = read(ds, "commits/%s.json" % cid)
    assert reader.xxh128hex(b) == cid, "the id is not the hash of the bytes"
    doc = json.loads(b)
    # the members in another order: the documented order restores them
    shuffled = dict(reversed(list(doc.items())))
    mine = reader.commit_bytes(shuffled)
    assert mine == b, (mine[:200], b[:200])
    assert reader.xxh128hex(mine) == cid


def run(ds, source, options):
    """6.8: the run name is the XXH3-128 of source LF options; the merge
    writes the head with it as its write id (4.3.1)."""
    want = reader.xxh128hex(("%s\n%s" % (source, options)).encode())
    got = head(ds)["writes"][-1]
    assert got == want, (got, want)


def chunk(path):
    with open(path, "rb") as f:
        reader.chunk_decode(f.read())


def no_content_size(ds, key):
    b = reader.chunk_encode_zstd(read(ds, key), content_size=False)
    with open(os.path.join(ds, key), "wb") as f:
        f.write(b)
    # the manifest entry's whole-object size follows (4.3.3)
    path = os.path.join(ds, "staging/manifest.json")
    m = head(ds)
    tname, h = key.split("/")[1:]
    for e in tensor(m, tname)["chunks"]:
        if e[0] == h:
            e[2] = len(b)
    with open(path, "wb") as f:
        f.write(reader.dumps(m).encode())


if __name__ == "__main__":
    {"key-tensors": key_tensors, "key-runs": key_runs, "commit": commit, "run": run,
     "chunk": chunk, "no-content-size": no_content_size}[sys.argv[1]](
        *sys.argv[2:])
