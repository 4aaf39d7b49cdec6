"""A reader of dlk datasets written from formats/dlk-v1.md alone.

It shares no code with libdlk: hashes come from the system's libxxhash
and zstd from libzstd, through ctypes, so that a statement of the spec
that the tool does not keep fails here.  Used by tests/t/t134-*.sh.
"""
import ctypes
import ctypes.util
import json
import re
import struct
import sys


def _lib(name):
    path = ctypes.util.find_library(name)
    if not path:
        sys.exit("reader.py: lib%s not found" % name)
    return ctypes.CDLL(path)


_xxh = _lib("xxhash")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


class _H128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


_xxh.XXH3_128bits.restype = _H128
_xxh.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

_zstd = _lib("zstd")
_zstd.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
_zstd.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_zstd.ZSTD_decompress.restype = ctypes.c_size_t
_zstd.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.c_char_p, ctypes.c_size_t]
_zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]
_zstd.ZSTD_createCCtx.restype = ctypes.c_void_p
_zstd.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                         ctypes.c_int]
_zstd.ZSTD_compress2.restype = ctypes.c_size_t
_zstd.ZSTD_compress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_size_t, ctypes.c_char_p,
                                 ctypes.c_size_t]
_zstd.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]


def xxh64(b):
    """XXH3-64, seed 0 (§Conventions)."""
    return _xxh.XXH3_64bits(b, len(b))


def xxh128hex(b):
    """XXH3-128 as text: high 64 bits then low, 16 digits each."""
    h = _xxh.XXH3_128bits(b, len(b))
    return "%016x%016x" % (h.high64, h.low64)


def zstd_content_size(frame):
    return _zstd.ZSTD_getFrameContentSize(frame, len(frame))


def zstd_decompress(frame, size):
    out = ctypes.create_string_buffer(max(size, 1))
    got = _zstd.ZSTD_decompress(out, size, frame, len(frame))
    assert not _zstd.ZSTD_isError(got) and got == size, got
    return out.raw[:size]


def zstd_compress(raw, content_size=True):
    """One frame; content_size=False leaves the frame without one."""
    cctx = _zstd.ZSTD_createCCtx()
    _zstd.ZSTD_CCtx_setParameter(cctx, 200, 1 if content_size else 0)
    cap = len(raw) + 1024
    out = ctypes.create_string_buffer(cap)
    n = _zstd.ZSTD_compress2(cctx, out, cap, raw, len(raw))
    _zstd.ZSTD_freeCCtx(cctx)
    assert not _zstd.ZSTD_isError(n)
    return out.raw[:n]


HEADER = struct.Struct("<4sHBBBBHIQQQQQQ")


def chunk_decode(b):
    """§3.1-3.5: the header's fields and the raw payload, every check."""
    (magic, version, dtype, codec, ndim, flags, reserved, samples,
     index_bytes, stored, raw, raw_hash, stored_hash,
     header_hash) = HEADER.unpack_from(b, 0)
    assert magic == b"DLKC" and version == 1 and reserved == 0
    assert len(b) == 64 + index_bytes + stored
    assert xxh64(b[:56] + b[64:64 + index_bytes]) == header_hash
    payload = b[64 + index_bytes:]
    assert xxh64(payload) == stored_hash
    if codec == 1:
        assert zstd_content_size(payload) == raw
        payload = zstd_decompress(payload, raw)
    assert xxh64(payload) == raw_hash
    return dict(dtype=dtype, codec=codec, ndim=ndim, flags=flags,
                samples=samples, index_bytes=index_bytes, raw=payload)


def samples_of(b):
    """The samples of a variable-shape chunk of ndim 1 (§3.2), as bytes."""
    f = chunk_decode(b)
    assert f["flags"] & 1 and f["ndim"] == 1
    n = f["samples"]
    offs = struct.unpack_from("<%dQ" % (n + 1), b, 64)
    return [f["raw"][offs[i]:offs[i + 1]] for i in range(n)]


def chunk_encode_zstd(b, content_size):
    """The zstd chunk b with its payload compressed again (content size
    in the frame or not), every checksum and size right."""
    f = chunk_decode(b)
    assert f["codec"] == 1
    stored = zstd_compress(f["raw"], content_size)
    head = bytearray(b[:64 + f["index_bytes"]])
    struct.pack_into("<Q", head, 24, len(stored))
    struct.pack_into("<Q", head, 48, xxh64(stored))
    struct.pack_into("<Q", head, 56, xxh64(bytes(head[:56]) +
                                           bytes(head[64:])))
    return bytes(head) + stored


def dumps(v):
    """JSON as libdlk writes it (§4.1): compact, members in order, UTF-8
    as is, '/' not escaped, other control characters as \\u00XX in
    upper case."""
    text = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return re.sub(r"(\\\\)|\\u([0-9a-f]{4})",
                  lambda m: m.group(1) or "\\u" + m.group(2).upper(), text)


TOP = ["format", "version", "parent", "key_index", "key_runs", "key_base",
       "views", "time", "message", "stats", "tensors"]
TENSOR = ["name", "dtype", "kind", "shape", "codec", "level", "chunk_bytes",
          "part_bytes", "class_names", "samples", "shape_min", "shape_max",
          "segments", "chunks"]
KEY = ["object", "rows"]
VIEW = ["name", "object", "rows", "dataset_rows", "query"]


def _ordered(obj, order):
    assert set(obj) <= set(order), sorted(set(obj) - set(order))
    return {k: obj[k] for k in order if k in obj}


def commit_bytes(doc):
    """The bytes of a commit document (§6.1) from its members, in the
    spec's order whatever order doc has."""
    d = _ordered(doc, TOP)
    d["tensors"] = [_ordered(t, TENSOR) for t in d["tensors"]]
    if "key_index" in d:
        d["key_index"] = _ordered(d["key_index"], KEY)
    if "key_runs" in d:
        d["key_runs"] = [_ordered(r, KEY) for r in d["key_runs"]]
    if "views" in d:
        d["views"] = [_ordered(v, VIEW) for v in d["views"]]
    d["stats"] = _ordered(d["stats"], ["bytes_added", "chunks_added"])
    return dumps(d).encode()


def version_hash(v):
    """§6.9: 0 for an empty or all-space version, a hash of 0 stored as 1."""
    if not v.strip(b" "):
        return 0
    return xxh64(v) or 1


def key_run(b):
    """§6.9: a run object (DLKR), checked; its (key hash, version hash)
    pairs."""
    assert b[:4] == b"DLKR", b[:4]
    version, r1, first, rows, block, r2, table_hash, header_hash = \
        struct.unpack_from("<HHQQIIQQ", b, 4)
    assert version == 1 and r1 == 0 and r2 == 0 and 1 <= block <= 1 << 20
    assert xxh64(b[:40]) == header_hash
    nb = -(-rows // block)
    assert len(b) == 48 + 16 * nb + 16 * rows
    table = b[48:48 + 16 * nb]
    assert xxh64(table) == table_hash
    ents = b[48 + 16 * nb:]
    pairs = [struct.unpack_from("<QQ", ents, 16 * i) for i in range(rows)]
    assert pairs == sorted(pairs)
    for j in range(nb):
        fk, bh = struct.unpack_from("<QQ", table, 16 * j)
        blk = ents[16 * j * block:16 * min(rows, (j + 1) * block)]
        assert xxh64(blk) == bh and pairs[j * block][0] == fk
    return first, pairs
