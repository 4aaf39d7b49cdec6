"""reader_check.py WHAT ARGS...: checks of a dataset by tests/spec/reader.py
(formats/dlk-v1.md alone); exits non-zero with the difference."""
import json
import os
import re
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
        assert t["chunk_bytes"] == m["tensors"][0]["chunk_bytes"], t
        assert "part_bytes" not in t and "class_names" not in t, t


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


def _section(spec, title):
    at = spec.index("\n### " + title)
    end = spec.find("\n### ", at + 1)
    return spec[at:end if end > 0 else len(spec)]


def _blocks(text):
    """The fenced blocks of a section of the spec, in order."""
    return re.findall(r"\n```[a-z]*\n(.*?)\n```", text, re.S)


def _xxd(block):
    out = b""
    for line in block.splitlines():
        hexpart = line.split(": ", 1)[1][:39]
        out += bytes.fromhex(hexpart.replace(" ", ""))
    return out


def example(spec_path, ds, created):
    """formats/dlk-v1.md section 7 against the dataset its commands made
    again: chunk names, manifests, hex dumps, the commit's sizes."""
    spec = open(spec_path, encoding="utf-8").read()
    sec = spec[spec.index("## 7. Worked example"):
               spec.index("## Appendix A.")]
    m = head(ds)
    names = sorted("chunks/%s/%s" % (t["name"], e[0])
                   for t in m["tensors"] for e in t["chunks"])
    listed = re.findall(r"/tmp/x/(chunks/\S+)", sec)
    assert listed == names, (listed, names)
    b = _blocks(_section(sec, "7.2"))
    with open(created, "rb") as f:
        assert b[0].encode() == f.read(), "7.2: the manifest after create"
    shown = json.loads(b[1])
    assert shown["tensors"] == m["tensors"], "7.2: the manifest after ingest"
    cid = read(ds, "refs/heads/main").decode().strip()
    doc = json.loads(read(ds, "commits/%s.json" % cid))
    shown = _blocks(_section(sec, "7.3"))[0].replace("[…]", "[]")
    assert json.loads(shown)["stats"] == doc["stats"], "7.3: stats"
    for title in ("7.4", "7.5", "7.6"):
        part = _section(sec, title)
        key = re.search(r"`(chunks/[a-z]+/)([0-9a-f]{8})…`", part)
        name = next(n for n in names if n.startswith(key.group(1) +
                                                      key.group(2)))
        b = read(ds, name)
        assert _xxd(_blocks(part)[0]) == b, title + ": the hex dump"
        assert ("(%d bytes)" % len(b)) in part.splitlines()[1], title
        reader.chunk_decode(b)


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
    {"key-tensors": key_tensors, "key-runs": key_runs, "commit": commit, "run": run, "example": example,
     "chunk": chunk, "no-content-size": no_content_size}[sys.argv[1]](
        *sys.argv[2:])
