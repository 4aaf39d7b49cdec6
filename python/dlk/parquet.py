"""Parquet tables (the Hugging Face hub's format) into a dlk dataset.

    dlk.ingest_parquet("pets", "data/", create=True, resize=(224, 224),
                       fit="crop")
    python3 -m dlk.parquet create pets data/ --resize 224x224 --json

pyarrow reads the tables; dlk reads nothing of them itself.  Each row of
FILE.parquet becomes the objects a folder of images with a
metadata.jsonl would give: its encoded image "FILE.parquet/ROW.jpg" (or
.png) and a line of "FILE.parquet/metadata.jsonl" with the row's other
columns, handed to the library's ingest in memory
(dlk_ingest_opts.objects).  The library groups, decodes, resizes, keys
and appends them as it does a directory's files: the schema is inferred
as for metadata.jsonl (strings a text tensor, integers i64, other numbers
and lists of numbers f32, a "label" column a class_label tensor),
--dry-run, max_skip, resume after an interruption and reruns by key
(FILE.parquet/ROW, versioned by the file's size and mtime) are the same,
and so are --shard's shares.  A table's rows keep row order: in the
shuffled order up to 8 tables take turns at the place of the first,
each read once from its start (formats/dlk-v1.md section 6.8).  The source may be an s3:// prefix or
object, read with pyarrow's S3 filesystem set up from the AWS variables
the dlk command reads (dlk's store has no Python binding for ranged
reads, and pyarrow reads a file's footer and column chunks by range).
A file is read a batch of rows at a time, its columns read only.  The
metadata lines are held for the run; of the images, up to hold_mb MiB
(256) are kept from the listing, and beyond that a row's image is read
again when the library asks for it (dlk_ingest_opts.read_object), by a
reader per table that moves front to back through its batches: memory
is bounded by those batches, not by the tables.
"""
import collections
import json
import math
import os
import sys
import threading
import zlib

from . import _core

# a Parquet column's Hugging Face feature "_type" of an image
_IMAGE_TYPES = ("Image",)
_FITS = {"stretch": 0, "crop": 1, "pad": 2}
# rows a batch of a table's listing and of its reader
_LIST_ROWS = 64
_READ_ROWS = 64
# a reader's batches kept behind the row it reads (rows asked for out of
# order by ingest's threads), in bytes, and the readers open at once
_WINDOW = 16 << 20
_READERS = 16
# A table is read a row group at a time: pyarrow's pre-buffering reads
# every row group asked for ahead (the whole file, for a reader from its
# start), so each is asked for alone.  One of up to _GROUP_WHOLE bytes is
# read whole, its column chunks in a few coalesced ranges (as S3 wants);
# a larger one (a file written as one row group) is streamed, _BUFFER
# bytes of its pages at a time.
_GROUP_WHOLE = 64 << 20
_BUFFER = 1 << 20


def _parquet_file(pa, src, path):
    """The file at path, opened to read a row group whole."""
    return pa.parquet.ParquetFile(src.open(path), pre_buffer=True)


def _batches(pa, src, path, columns, rows, group=0, pf=None):
    """The batches of rows of the columns of the file at path (pf, when
    the caller has it open: _parquet_file), from row group group on, a
    row group at a time."""
    if pf is None:
        pf = _parquet_file(pa, src, path)
    streamed = None
    for g in range(group, pf.metadata.num_row_groups):
        f = pf
        if pf.metadata.row_group(g).total_byte_size > _GROUP_WHOLE:
            if streamed is None:
                streamed = pa.parquet.ParquetFile(
                    src.open(path), pre_buffer=False, buffer_size=_BUFFER)
            f = streamed
        # one thread: pyarrow's would read the columns ahead
        yield from f.iter_batches(batch_size=rows, row_groups=[g],
                                  columns=columns, use_threads=False)


def _pa():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as e:
        raise ImportError("dlk.ingest_parquet needs pyarrow: python3 -m pip "
                          "install pyarrow") from e
    return pyarrow


def _s3(pa):
    """A pyarrow S3 filesystem with the settings the dlk command reads:
    AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION or
    AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
    AWS_SESSION_TOKEN (else the AWS SDK's chain: AWS_PROFILE, ~/.aws),
    DLK_S3_NO_SIGN and DLK_S3_ADDRESSING."""
    import pyarrow.fs
    env = os.environ.get
    kw = {}
    ep = env("AWS_ENDPOINT_URL_S3") or env("AWS_ENDPOINT_URL")
    if ep:
        scheme, sep, rest = ep.partition("://")
        kw["endpoint_override"] = rest.rstrip("/") if sep else ep
        if sep:
            kw["scheme"] = scheme
    region = env("AWS_REGION") or env("AWS_DEFAULT_REGION")
    if region:
        kw["region"] = region
    if env("DLK_S3_NO_SIGN", "") not in ("", "0"):
        kw["anonymous"] = True
    elif env("AWS_ACCESS_KEY_ID") and env("AWS_SECRET_ACCESS_KEY"):
        kw["access_key"] = env("AWS_ACCESS_KEY_ID")
        kw["secret_key"] = env("AWS_SECRET_ACCESS_KEY")
        if env("AWS_SESSION_TOKEN"):
            kw["session_token"] = env("AWS_SESSION_TOKEN")
    addr = env("DLK_S3_ADDRESSING", "")
    if addr == "virtual":
        kw["force_virtual_addressing"] = True
    elif addr not in ("", "path", "auto"):
        raise ValueError("DLK_S3_ADDRESSING must be path, virtual or auto, "
                         "not '%s'" % addr)
    return pyarrow.fs.S3FileSystem(**kw)


class _Src:
    """Where the tables are: a local directory, or an S3 prefix through
    pyarrow's filesystem."""

    def __init__(self, pa, source):
        self.fs = None
        if source.startswith("s3://"):
            self.fs = _s3(pa)
            self.url = source.rstrip("/")
        else:
            self.url = os.path.abspath(source)

    def open(self, path):
        if self.fs is None:
            return path
        return self.fs.open_input_file(path)


def _files(pa, source):
    """(src, root, [(parquet path, its key, version)], [(key, reason) of
    the others]): the file source, or every file below it."""
    src = _Src(pa, source)
    if src.fs is not None:
        return _s3_files(pa, src)
    source = src.url
    if os.path.isfile(source):
        return (src, os.path.dirname(source),
                [(source, os.path.basename(source), _version(source))], [])
    if not os.path.isdir(source):
        raise FileNotFoundError("no Parquet file or directory at '%s'" % source)
    found, other = [], []
    for d, dirs, names in os.walk(source):
        dirs[:] = sorted(n for n in dirs if not n.startswith("."))
        for n in sorted(names):
            p = os.path.join(d, n)
            rel = os.path.relpath(p, source)
            if n.lower().endswith(".parquet"):
                found.append((p, rel, _version(p)))
            else:
                other.append((rel, "not a sample: not a Parquet file"
                              if not n.startswith(".")
                              else "not a sample: a hidden file"))
    return src, source, found, other


def _version(path):
    st = os.stat(path)
    return "%x-%x.%x" % (st.st_size, st.st_mtime_ns // 10**9,
                         st.st_mtime_ns % 10**9)


def _s3_version(info):
    # pyarrow tells no ETag: the size and the modification time stand
    # for the bytes, as a local file's do
    ns = info.mtime_ns or 0
    return "%x-%x.%x" % (info.size or 0, ns // 10**9, ns % 10**9)


def _s3_files(pa, src):
    import pyarrow.fs
    path = src.url[5:]
    if not path or path.startswith("/"):
        raise ValueError("'%s' names no bucket" % src.url)
    info = src.fs.get_file_info(path)
    if info.type == pyarrow.fs.FileType.File:
        root = src.url.rpartition("/")[0]
        return src, root, [(path, info.base_name, _s3_version(info))], []
    if "/" not in path and info.type == pyarrow.fs.FileType.NotFound:
        raise FileNotFoundError("no bucket '%s'" % path)
    sel = pyarrow.fs.FileSelector(path, recursive=True, allow_not_found=True)
    found, other = [], []
    for i in sorted(src.fs.get_file_info(sel), key=lambda i: i.path):
        if i.type != pyarrow.fs.FileType.File:
            continue
        rel = i.path[len(path):].lstrip("/")
        # as a directory's walk: below a hidden folder nothing is seen
        if any(p.startswith(".") for p in rel.split("/")[:-1]):
            continue
        if i.base_name.lower().endswith(".parquet"):
            found.append((i.path, rel, _s3_version(i)))
        else:
            other.append((rel, "not a sample: a hidden file"
                          if i.base_name.startswith(".")
                          else "not a sample: not a Parquet file"))
    if not found and not other:
        raise FileNotFoundError("no Parquet file or prefix at '%s'" %
                                src.url)
    return src, src.url, found, other


def _env_uint(name):
    """An environment variable's whole number, None when unset."""
    v = os.environ.get(name, "")
    if not v:
        return None
    if not v.isdigit() or int(v) > 100000000:
        raise ValueError("--shard auto: %s is '%s', not a whole number" %
                         (name, v))
    return int(v)


def _shard(spec):
    """(share, shares) of spec: None (everything: (0, 0)), (I, N), "I/N",
    or "auto[/N]" (the share a Kubernetes Indexed Job's
    JOB_COMPLETION_INDEX or a Slurm job array's SLURM_ARRAY_TASK_ID names,
    as `dlk ingest --shard auto` takes it)."""
    if spec is None:
        return 0, 0
    if isinstance(spec, (tuple, list)):
        i, n = (int(x) for x in spec)
    elif spec == "auto" or str(spec).startswith("auto/"):
        n = None
        if spec != "auto":
            try:
                n = int(spec[5:])
            except ValueError:
                raise ValueError("--shard '%s' is not auto or auto/N" %
                                 spec) from None
        k8s = _env_uint("JOB_COMPLETION_INDEX")
        tid = _env_uint("SLURM_ARRAY_TASK_ID")
        if k8s is not None:
            if n is None:
                raise ValueError(
                    "--shard auto: JOB_COMPLETION_INDEX is %d, but a "
                    "Kubernetes Job does not tell its completions: give "
                    "them as --shard auto/N" % k8s)
            i = k8s
        elif tid is not None:
            lo = _env_uint("SLURM_ARRAY_TASK_MIN") or 0
            hi = _env_uint("SLURM_ARRAY_TASK_MAX")
            count = _env_uint("SLURM_ARRAY_TASK_COUNT")
            if count is not None and hi is not None and hi - lo + 1 != count:
                raise ValueError(
                    "--shard auto: the Slurm array %d-%d has %d tasks, not "
                    "one for each index: give each task --shard I/N" %
                    (lo, hi, count))
            if count is None and n is None:
                raise ValueError(
                    "--shard auto: SLURM_ARRAY_TASK_ID is set but not "
                    "SLURM_ARRAY_TASK_COUNT: give --shard auto/N")
            if count is not None and n is not None and count != n:
                raise ValueError("--shard auto/%d: the Slurm array has %d "
                                 "tasks" % (n, count))
            if n is None:
                n = count
            if tid < lo:
                raise ValueError("--shard auto: SLURM_ARRAY_TASK_ID %d is "
                                 "below SLURM_ARRAY_TASK_MIN %d" % (tid, lo))
            i = tid - lo
        else:
            raise ValueError(
                "--shard auto: neither JOB_COMPLETION_INDEX (a Kubernetes "
                "Indexed Job) nor SLURM_ARRAY_TASK_ID (a Slurm job array) "
                "is set: give --shard I/N")
    else:
        try:
            i, n = (int(x) for x in str(spec).split("/"))
        except ValueError:
            raise ValueError("--shard '%s' is not I/N with 0 <= I < N, or "
                             "auto" % spec) from None
    if not 1 <= n <= 100000 or not 0 <= i < n:
        raise ValueError("--shard: share %d of %d is not one of 0 to N-1 "
                         "(N from 1 to 100000)" % (i, n))
    return i, n


def _hf_features(schema):
    """The Hugging Face features a file's schema metadata records, {} if
    none."""
    meta = schema.metadata or {}
    raw = meta.get(b"huggingface")
    if not raw:
        return {}
    try:
        info = json.loads(raw)
        feats = info.get("info", {}).get("features", {})
        return feats if isinstance(feats, dict) else {}
    except (ValueError, AttributeError):
        return {}


def _is_bytes(pa, t):
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or
            getattr(pa.types, "is_binary_view", lambda _: False)(t))


def _image_column(pa, schema, feats, want):
    """The column of encoded images: `want`, else the one Hugging Face
    marks as an Image, else the first struct with binary "bytes", else the
    first binary column."""
    def ok(f):
        t = f.type
        if _is_bytes(pa, t):
            return True
        return (pa.types.is_struct(t) and t.get_field_index("bytes") >= 0 and
                _is_bytes(pa, t.field("bytes").type))
    if want is not None:
        if want not in schema.names:
            raise ValueError("no column '%s' (columns: %s)" %
                             (want, ", ".join(schema.names)))
        if not ok(schema.field(want)):
            raise ValueError("column '%s' is %s, not encoded image bytes "
                             "(binary, or a struct with binary 'bytes')" %
                             (want, schema.field(want).type))
        return want
    for f in schema:
        ft = feats.get(f.name)
        if isinstance(ft, dict) and ft.get("_type") in _IMAGE_TYPES and ok(f):
            return f.name
    for pick in (lambda f: pa.types.is_struct(f.type), lambda f: True):
        for f in schema:
            if ok(f) and pick(f):
                return f.name
    return None


def _ext(data, path):
    """The image's extension: its path's, else its bytes' signature (JPEG
    when neither tells: the decoder then names what it found)."""
    if path:
        e = os.path.splitext(path)[1].lower().lstrip(".")
        if e in ("jpg", "jpeg", "png"):
            return e
    head = bytes(data[:8]) if data is not None else b""
    if head.startswith(b"\x89PNG"):
        return "png"
    return "jpg"


def _cell(v):
    """A value as metadata.jsonl holds it (JSON has no NaN nor infinity:
    those are null, as a missing value is)."""
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, list):
        return [_cell(x) for x in v]
    return v


def _column_kind(pa, t):
    """None when column type t is read, else why not."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if (pa.types.is_string(t) or pa.types.is_large_string(t) or
            pa.types.is_integer(t) or pa.types.is_floating(t) or
            pa.types.is_boolean(t)):
        return None
    if pa.types.is_list(t) or pa.types.is_large_list(t) or \
            pa.types.is_fixed_size_list(t):
        v = t.value_type
        if pa.types.is_integer(v) or pa.types.is_floating(v) or \
                pa.types.is_boolean(v):
            return None
    return "a column of type %s: not read" % t


def _label_column(schema, feats, label, rel):
    """The label column (the one named, or the first ClassLabel) and its
    class names, if the features give them."""
    lab = label
    if lab is None:
        for f in schema:
            ft = feats.get(f.name)
            if isinstance(ft, dict) and ft.get("_type") == "ClassLabel":
                lab = f.name
                break
    names = None
    if lab is not None:
        if lab not in schema.names:
            raise ValueError("no label column '%s' in '%s' (columns: %s)" %
                             (lab, rel, ", ".join(schema.names)))
        ft = feats.get(lab)
        if isinstance(ft, dict) and isinstance(ft.get("names"), list):
            names = ft["names"]
    return lab, names


def _kept_columns(pa, schema, col, lab, unused_cols):
    """The columns other than the images' that the metadata keeps; the
    others, with why, into unused_cols."""
    cols = []
    for f in schema:
        if f.name == col:
            continue
        why = None
        if f.name == "file_name":
            why = "a column named file_name: the rows' own objects have it"
        elif f.name == lab:
            why = None
        else:
            why = _column_kind(pa, f.type)
        if why:
            unused_cols.setdefault(f.name, why)
            continue
        cols.append(f.name)
    return cols


def _images(pa, arr):
    """(image bytes array, paths or None) of an image column's values."""
    if hasattr(arr, "combine_chunks"):
        arr = arr.combine_chunks()
    paths = None
    if pa.types.is_struct(arr.type):
        if arr.type.get_field_index("path") >= 0:
            paths = arr.field("path").to_pylist()
        valid = arr.is_valid()
        arr = arr.field("bytes")
        # a null struct: no image, whatever its field holds
        arr = pa.compute.if_else(valid, arr, pa.nulls(len(arr), arr.type))
    return arr, paths


class _Table:
    """What a file's rows need to be read again: where, its image column
    and the first row of each row group."""

    def __init__(self, src, path, col, pf):
        self.src, self.path, self.col = src, path, col
        self.starts, n = [], 0
        for g in range(pf.num_row_groups):
            self.starts.append(n)
            n += pf.metadata.row_group(g).num_rows


class _Reader:
    """One table's images read front to back a batch at a time, keeping
    up to _WINDOW bytes of batches behind; a row before them reopens the
    table at its row group."""

    def __init__(self, pa, table):
        self.pa, self.t = pa, table
        self.lock = threading.Lock()
        self.it, self.next = None, 0  # the batches, the first row of the next
        self.kept, self.bytes = collections.deque(), 0

    def _open(self, row):
        import bisect
        t = self.t
        g = max(bisect.bisect_right(t.starts, row) - 1, 0)
        self.it = _batches(self.pa, t.src, t.path, [t.col], _READ_ROWS, g)
        self.next = t.starts[g] if t.starts else 0
        self.kept.clear()
        self.bytes = 0

    def row(self, r):
        with self.lock:
            if self.it is None or (self.kept and r < self.kept[0][0]) or \
                    (not self.kept and r < self.next):
                self._open(r)
            while r >= self.next:
                b = next(self.it, None)
                if b is None:
                    raise ValueError("row %d of '%s' is past its end" %
                                     (r, self.t.path))
                img, _ = _images(self.pa, b.column(self.t.col))
                self.kept.append((self.next, img))
                self.next += len(img)
                self.bytes += img.nbytes
                while len(self.kept) > 2 and self.bytes > _WINDOW:
                    self.bytes -= self.kept.popleft()[1].nbytes
            for start, img in self.kept:
                if start <= r < start + len(img):
                    v = img[r - start]
                    if not v.is_valid:
                        raise ValueError("row %d of '%s' has no image now" %
                                         (r, self.t.path))
                    return v.as_buffer()
            raise ValueError("row %d of '%s' was passed" % (r, self.t.path))


class _Readers:
    """The library's read_object: objects[i] is a row's image, read by
    its table's reader and checked against the CRC-32 its listing took
    (crcs[i]), so that a table rewritten since is a failed read, never
    another row's bytes; at most _READERS tables open at once."""

    def __init__(self, pa, objs, crcs, tables):
        self.pa, self.objs, self.crcs, self.tables = pa, objs, crcs, tables
        self.lock = threading.Lock()
        self.open = collections.OrderedDict()

    def __call__(self, i):
        b = self._read(i)
        if zlib.crc32(b) != self.crcs[i]:
            raise ValueError("its table changed since it was listed")
        return b

    def _read(self, i):
        key = self.objs[i][0]
        rel, _, name = key.rpartition("/")
        with self.lock:
            rd = self.open.get(rel)
            if rd is None:
                rd = self.open[rel] = _Reader(self.pa, self.tables[rel])
                if len(self.open) > _READERS:
                    self.open.popitem(last=False)
            self.open.move_to_end(rel)
        return rd.row(int(name.partition(".")[0]))


def _objects(pa, src, path, rel, ver, image, label, unused_cols, hold):
    """The objects of one Parquet file, its images and its metadata.jsonl,
    their CRC-32s (None for those held) and the _Table they are read
    again from.  hold: [bytes] of images that may still be kept; an image
    beyond it is listed by its size."""
    pf = _parquet_file(pa, src, path)
    schema = pf.schema_arrow
    feats = _hf_features(schema)
    col = _image_column(pa, schema, feats, image)
    if col is None:
        raise ValueError("'%s' has no column of encoded images (binary, or "
                         "a struct with binary 'bytes'); columns: %s" %
                         (rel, ", ".join(schema.names)))
    lab, names = _label_column(schema, feats, label, rel)
    cols = _kept_columns(pa, schema, col, lab, unused_cols)
    # a batch at a time, only the columns read: what stays is the
    # metadata lines and the images hold allows (slices of their batch's
    # buffer), not the table
    out, crcs, lines, i = [], [], [], 0
    for batch in _batches(pa, src, path, [col] + cols, _LIST_ROWS, pf=pf):
        img, paths = _images(pa, batch.column(col))
        values = {c: batch.column(c).to_pylist() for c in cols}
        del batch
        for j in range(len(img)):
            b = img[j].as_buffer() if img[j].is_valid else None
            name = "%d.%s" % (i, _ext(b, paths[j] if paths else None))
            lines.append(json.dumps(_meta_row(name, cols, values, j, lab,
                                              names), ensure_ascii=False))
            i += 1
            if b is None:
                continue
            # an empty image is a bad row, not a missing one
            if b.size <= hold[0]:
                hold[0] -= b.size
                out.append((rel + "/" + name, ver, b))
                crcs.append(None)
            else:
                out.append((rel + "/" + name, ver, None, b.size))
                crcs.append(zlib.crc32(b))
    meta = ("\n".join(lines) + "\n").encode()
    out.append((rel + "/metadata.jsonl", ver, meta))
    crcs.append(None)
    return out, crcs, _Table(src, path, col, pf)


def _meta_row(name, cols, values, j, lab, names):
    """Row j's line of metadata.jsonl: its image's file_name, its columns
    and its label (a class id given its name)."""
    row = {"file_name": name}
    for c in cols:
        v = values[c][j]
        if c == lab:
            if names is not None and isinstance(v, int) and \
                    0 <= v < len(names):
                v = names[v]
            row["label"] = v
            continue
        row[c] = _cell(v)
    return row


def ingest_parquet(url, source, create=False, image=None, label=None,
                   resize=None, fit="stretch", channels=0, max_skip=None,
                   dry_run=False, jobs=0, order="shuffled", seed=0,
                   no_key=False, exist_ok=False, strict_classes=False,
                   no_resume=False, shard=None, hold_mb=256):
    """Ingest the Parquet file (or every .parquet below the directory)
    `source` into the dataset at `url`; with create, make the dataset
    with the schema inferred from it first (as `dlk create`).  image: the
    column of encoded images (default: Hugging Face's Image column, else
    a struct with binary "bytes", else the first binary column); label:
    the class column (default: Hugging Face's ClassLabel column, its ids
    given their names, else a column "label"); resize (W, H) or "WxH",
    fit "stretch", "crop" or "pad", channels, max_skip (the share of rows
    that may be bad; None: 0.1, a negative number: no limit), dry_run,
    jobs, order ("shuffled" or "sorted"), seed, no_key, exist_ok,
    strict_classes, no_resume as for `dlk ingest`; shard "I/N", (I, N)
    or "auto[/N]" as `dlk ingest --shard`: this process takes share I of
    the rows of all the tables, and the last share to finish merges them
    all; hold_mb, the MiB of images kept from the listing (the rest is
    read again from the tables as it is ingested).

    Returns the dict `dlk ingest --json` prints (ingested, skipped,
    errors, planned, unused_objects, schema, new, present, changed, ...)
    and "unused_columns" {column: why}.  Rows stopped by Ctrl-C are kept:
    the same call continues.  A rejected run (max_skip) raises dlk.Error
    with the dict as .result."""
    pa = _pa()
    import pyarrow.compute  # noqa: F401 - pa.compute, for struct columns
    if isinstance(resize, str):
        try:
            w, h = (int(x) for x in resize.lower().split("x"))
        except ValueError:
            raise ValueError("resize '%s' is not WxH" % resize) from None
    elif resize:
        w, h = resize
    else:
        w, h = 0, 0
    if fit not in _FITS:
        raise ValueError("fit '%s' is not one of %s" % (fit, ", ".join(_FITS)))
    if order not in ("shuffled", "sorted"):
        raise ValueError("order '%s' is not shuffled or sorted" % order)
    sh, nsh = _shard(shard)
    if not isinstance(hold_mb, (int, float)) or hold_mb < 0:
        raise ValueError("hold_mb must be a number of MiB, 0 or more")
    src, root, files, other = _files(pa, str(source))
    objs, crcs, unused_cols, tables = [], [], {}, {}
    hold = [int(hold_mb * (1 << 20))]
    for p, rel, ver in files:
        o, c, tables[rel] = _objects(pa, src, p, rel, ver, image, label,
                                     unused_cols, hold)
        objs += o
        crcs += c
    skip = 0.0 if max_skip is None else float(max_skip)
    try:
        r = _core._ingest(str(url), root, objs, bool(create), int(w), int(h),
                          _FITS[fit], int(channels), skip, bool(dry_run),
                          int(jobs), order == "sorted", int(seed),
                          bool(no_key), bool(exist_ok), bool(strict_classes),
                          bool(no_resume), sh, nsh,
                          _Readers(pa, objs, crcs, tables), True)
    except _core.Error as e:
        res = getattr(e, "result", None)
        if isinstance(res, dict):
            _add_unused(res, len(files), other, unused_cols)
        raise
    _add_unused(r, len(files), other, unused_cols)
    return r


def _add_unused(r, nfiles, other, unused_cols):
    """The result told in the tables' terms: the metadata.jsonl that stood
    for each file's columns is none of the caller's objects; the files of
    the directory that are no table are its strays, as from-dir's; a bad
    row's key names its file and row."""
    ours = [o for o in r["unused_objects"]
            if not o["key"].endswith(".parquet/metadata.jsonl")]
    r["unused"] -= nfiles  # each file's, listed or past the list's end
    r["unused_objects"] = [{"key": k, "reason": why} for k, why in other] + \
        ours
    r["unused"] += len(other)
    r["unused_columns"] = unused_cols
    for e in r["errors"]:
        f, _, row = e["key"].rpartition("/")
        if f.lower().endswith(".parquet") and row.split(".")[0].isdigit():
            e["file"], e["row"] = f, int(row.split(".")[0])


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(
        prog="python3 -m dlk.parquet",
        description="Ingest Parquet tables into a dlk dataset "
                    "(dlk.ingest_parquet).")
    ap.add_argument("verb", choices=("create", "ingest"))
    ap.add_argument("dataset")
    ap.add_argument("source", help="a .parquet file or a directory of them")
    ap.add_argument("--image")
    ap.add_argument("--label")
    ap.add_argument("--resize")
    ap.add_argument("--fit", default="stretch", choices=sorted(_FITS))
    ap.add_argument("--channels", type=int, default=0)
    ap.add_argument("--max-skip", type=float)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--order", default="shuffled",
                    choices=("shuffled", "sorted"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-key", action="store_true")
    ap.add_argument("--exist-ok", action="store_true")
    ap.add_argument("--strict-classes", action="store_true")
    ap.add_argument("--no-resume", action="store_true")
    ap.add_argument("--shard", help="I/N, or auto[/N] (dlk-ingest(1))")
    ap.add_argument("--hold-mb", type=float, default=256,
                    help="MiB of images kept from the listing; the rest "
                         "is read again as it is ingested (256)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        r = ingest_parquet(a.dataset, a.source, create=a.verb == "create",
                           image=a.image, label=a.label, resize=a.resize,
                           fit=a.fit, channels=a.channels,
                           max_skip=a.max_skip, dry_run=a.dry_run,
                           jobs=a.jobs, order=a.order, seed=a.seed,
                           no_key=a.no_key, exist_ok=a.exist_ok,
                           strict_classes=a.strict_classes,
                           no_resume=a.no_resume, shard=a.shard,
                           hold_mb=a.hold_mb)
    except _core.Error as e:
        print("dlk: %s" % e, file=sys.stderr)
        res = getattr(e, "result", None)
        if a.json and isinstance(res, dict):
            res["error"] = {"message": str(e), "code": e.exit_code}
            print(json.dumps(res))
        return e.exit_code
    except (ValueError, OSError, ImportError) as e:
        print("dlk: %s" % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dlk: interrupted: run the same command to continue",
              file=sys.stderr)
        return 130
    if a.json:
        print(json.dumps(r))
        return 0
    for e in r["errors"]:
        print("dlk: skipped '%s': %s" % (e["key"], e["reason"]),
              file=sys.stderr)
    for c, why in sorted(r["unused_columns"].items()):
        print("dlk: column '%s' not ingested: %s" % (c, why), file=sys.stderr)
    if r["dry_run"]:
        print("dry run, nothing written: would ingest %d rows; %d objects "
              "not ingested, %d skipped" % (r["planned"], r["unused"],
                                            r["skipped"]))
    elif (r.get("keys") and not r.get("new") and not r["ingested"] and
          not r["skipped"] and not r.get("resumed")):
        # a rerun over the same tables: said as dlk ingest says it
        print("nothing new: %d rows already ingested; %d changed since "
              "(skipped)" % (r.get("present", 0), r.get("changed", 0)))
    else:
        print("ingested %d rows in %.2f s; %d skipped" %
              (r["ingested"], r["seconds"], r["skipped"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
