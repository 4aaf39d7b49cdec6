/* _core.c - the CPython binding of libdlk: thin wrappers over the public
 * API of include/dlk.h, and batch tensors that hand their memory out
 * through DLPack without a copy.
 *
 * Why a C extension rather than ctypes or cffi: a batch becomes a handful
 * of Python objects and DLPack capsules whose deleters must run the
 * library's release, and the loader call must drop the GIL while it
 * waits; here that costs a few microseconds per batch, with no struct
 * layouts copied into Python.
 *
 * It is built against the stable ABI (Py_LIMITED_API, 3.11 the oldest:
 * the buffer protocol joined it there; setup.py defines it), so that one
 * wheel serves every CPython from 3.11 on: its types are made from specs
 * at import (heap types), and it reaches no object's fields but through
 * the API. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlk.h"
#include "store_env.h"

/* ---- DLPack (dlpack.h v1.0; the ABI is stable) --------------------- */

typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *);
} DLManagedTensor;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
enum { kDLCPU = 1, kDLCUDA = 2 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };

/* ---- errors ---------------------------------------------------------- */

static PyObject *DlkError;
/* the types, made at import (PyInit__core) */
static PyTypeObject *DatasetType, *IndexType, *LoaderType, *KeptType,
    *TensorType;

/* The allocation and the release of an object of one of those types (or
 * of a Python subclass): through its type's slots; a heap type's object
 * holds a reference to its type, given back here. */
static PyObject *alloc_object(PyTypeObject *type)
{
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    return alloc(type, 0);
}

static void free_object(void *self)
{
    PyTypeObject *type = Py_TYPE((PyObject *)self);
    freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_fn(self);
    Py_DECREF(type);
}

/* The exit code `dlk` gives a failed call's status (cmd/common.c): 4 a
 * concurrent writer, else 3. */
static int exit_class(dlk_status c)
{
    return c == DLK_ECONFLICT ? 4 : 3;
}

/* Set at interpreter exit: loaders are then left to the process's end
 * rather than closed (a close waits for the reads in flight). */
static int exiting;

static PyObject *raise_dlk(const dlk_error *err)
{
    PyObject *msg = PyUnicode_DecodeUTF8(err->msg, strlen(err->msg),
                                         "backslashreplace");
    PyObject *e = msg ? PyObject_CallFunctionObjArgs(DlkError, msg, NULL) : NULL;
    Py_XDECREF(msg);
    if (!e)
        return NULL;
    PyObject *code = PyLong_FromLong((long)err->code),
             *ec = PyLong_FromLong(exit_class(err->code)),
             *why = PyUnicode_FromString(dlk_strerror(err->code));
    if (code && ec && why && !PyObject_SetAttrString(e, "code", code) &&
        !PyObject_SetAttrString(e, "exit_code", ec) &&
        !PyObject_SetAttrString(e, "reason", why))
        PyErr_SetObject(DlkError, e);
    Py_XDECREF(code);
    Py_XDECREF(ec);
    Py_XDECREF(why);
    Py_DECREF(e);
    return NULL;
}

/* ---- Dataset ------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    dlk_dataset *ds;
    pthread_mutex_t mu; /* a handle is used by one thread at a time */
} Dataset;

static PyObject *Dataset_new(PyTypeObject *type, PyObject *a, PyObject *k)
{
    (void)a;
    (void)k;
    Dataset *self = (Dataset *)alloc_object(type);
    if (self)
        pthread_mutex_init(&self->mu, NULL);
    return (PyObject *)self;
}

static void Dataset_dealloc(Dataset *self)
{
    dlk_dataset_free(self->ds);
    pthread_mutex_destroy(&self->mu);
    free_object(self);
}

static int Dataset_init(Dataset *self, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"url", "at", NULL};
    const char *url, *at = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|z", kws, &url, &at))
        return -1;
    if (self->ds) {
        PyErr_SetString(PyExc_RuntimeError, "dataset already open");
        return -1;
    }
    dlk_error err;
    /* the store's settings from os.environ and ~/.aws, as the dlk command
     * reads them (the library reads neither); read with the GIL held,
     * as os.environ is changed under it */
    store_env env = {.opts = DLK_STORE_OPTIONS_INIT};
    dlk_status rc = store_env_needed(url) ? store_env_load(&env, false, &err)
                                          : DLK_OK;
    if (!rc) {
        Py_BEGIN_ALLOW_THREADS
        rc = dlk_dataset_open_with(url, at, &env.opts, &self->ds, &err);
        Py_END_ALLOW_THREADS
    }
    store_env_free(&env);
    if (rc) {
        self->ds = NULL;
        raise_dlk(&err);
        return -1;
    }
    return 0;
}

static int need_ds(Dataset *self)
{
    if (!self->ds) {
        PyErr_SetString(PyExc_ValueError, "dataset is not open");
        return -1;
    }
    return 0;
}

static PyObject *dims(int ndim, const int64_t *d)
{
    PyObject *t = PyTuple_New(ndim);
    for (int i = 0; t && i < ndim; i++) {
        PyObject *v = d[i] == DLK_DIM_VARIABLE ? Py_NewRef(Py_None)
                                               : PyLong_FromLongLong(d[i]);
        if (!v || PyTuple_SetItem(t, i, v))
            Py_CLEAR(t);
    }
    return t;
}

static PyObject *Dataset_tensors(Dataset *self, PyObject *unused)
{
    (void)unused;
    if (need_ds(self))
        return NULL;
    size_t n = dlk_dataset_ntensors(self->ds);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        dlk_tensor_info ti;
        dlk_error err;
        if (dlk_tensor_info_get(self->ds, i, &ti, &err)) {
            Py_DECREF(list);
            return raise_dlk(&err);
        }
        PyObject *classes = PyList_New((Py_ssize_t)ti.n_class_names);
        for (size_t c = 0; classes && c < ti.n_class_names; c++) {
            PyObject *name = PyUnicode_FromString(ti.class_names[c]);
            if (!name || PyList_SetItem(classes, (Py_ssize_t)c, name))
                Py_CLEAR(classes);
        }
        PyObject *d = Py_BuildValue(
            "{s:s,s:s,s:s,s:N,s:N,s:K,s:K,s:K,s:K}", "name", ti.name, "kind",
            dlk_kind_name(ti.kind), "dtype", dlk_dtype_name(ti.dtype), "shape",
            dims(ti.ndim, ti.shape), "classes", classes, "samples",
            (unsigned long long)ti.samples, "chunks",
            (unsigned long long)ti.chunks, "stored_bytes",
            (unsigned long long)ti.stored_bytes, "raw_bytes",
            (unsigned long long)ti.raw_bytes);
        if (!d) {
            Py_DECREF(list);
            return NULL;
        }
        if (PyList_SetItem(list, (Py_ssize_t)i, d)) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

/* read(tensor, index) -> (dtype name, shape, bytes) */
static PyObject *Dataset_read(Dataset *self, PyObject *args)
{
    Py_ssize_t t;
    unsigned long long index;
    if (!PyArg_ParseTuple(args, "nK", &t, &index) || need_ds(self))
        return NULL;
    if (t < 0 || (size_t)t >= dlk_dataset_ntensors(self->ds)) {
        PyErr_SetString(PyExc_IndexError, "no such tensor");
        return NULL;
    }
    dlk_sample s;
    dlk_error err;
    dlk_status rc;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    rc = dlk_read_sample(self->ds, (size_t)t, index, &s, &err);
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_dlk(&err);
    PyObject *r = Py_BuildValue("(sNy#)", dlk_dtype_name(s.dtype),
                                dims(s.ndim, s.shape), (const char *)s.data,
                                (Py_ssize_t)s.nbytes);
    dlk_sample_free(&s);
    return r;
}

static int log_entry(void *ud, const dlk_log_entry *e)
{
    PyObject *samples = PyDict_New();
    for (size_t i = 0; samples && i < e->ntensors; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(e->samples[i]);
        if (!v || PyDict_SetItemString(samples, e->tensor_names[i], v)) {
            Py_XDECREF(v);
            Py_CLEAR(samples);
            break;
        }
        Py_DECREF(v);
    }
    if (!samples)
        return 1;
    PyObject *d = Py_BuildValue("{s:s,s:z,s:s,s:s,s:K,s:K,s:N}", "id", e->id,
                                "parent", e->parent, "time", e->time,
                                "message", e->message ? e->message : "",
                                "bytes_added",
                                (unsigned long long)e->bytes_added,
                                "chunks_added",
                                (unsigned long long)e->chunks_added,
                                "samples", samples);
    int bad = !d || PyList_Append((PyObject *)ud, d);
    Py_XDECREF(d);
    return bad;
}

static PyObject *Dataset_log(Dataset *self, PyObject *args)
{
    const char *at = NULL;
    Py_ssize_t max = 0;
    if (!PyArg_ParseTuple(args, "|zn", &at, &max) || need_ds(self))
        return NULL;
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    dlk_error err;
    /* the callback builds Python objects: the GIL stays held */
    pthread_mutex_lock(&self->mu);
    dlk_status rc = dlk_log(self->ds, at, max > 0 ? (size_t)max : 0,
                            log_entry, list, &err);
    pthread_mutex_unlock(&self->mu);
    if (PyErr_Occurred()) {
        Py_DECREF(list);
        return NULL;
    }
    if (rc) {
        Py_DECREF(list);
        return raise_dlk(&err);
    }
    return list;
}

/* view_rows(name) -> bytes: the view's rows as little-endian u64s. */
static PyObject *Dataset_view_rows(Dataset *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name) || need_ds(self))
        return NULL;
    uint64_t *rows = NULL, n = 0;
    dlk_error err;
    dlk_status rc;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    rc = dlk_view_rows(self->ds, name, &rows, &n, &err);
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_dlk(&err);
    PyObject *b = PyBytes_FromStringAndSize((const char *)rows,
                                            (Py_ssize_t)(n * sizeof *rows));
    free(rows);
    return b;
}

/* views() -> list of {name, rows, dataset_rows, object, query}. */
static PyObject *Dataset_views(Dataset *self, PyObject *noargs)
{
    (void)noargs;
    if (need_ds(self))
        return NULL;
    PyObject *list = PyList_New(0);
    dlk_view_info v;
    for (size_t i = 0; list && dlk_view_get(self->ds, i, &v) == 0; i++) {
        PyObject *d = Py_BuildValue("{s:s,s:K,s:K,s:s,s:s}", "name", v.name,
                                    "rows", (unsigned long long)v.rows,
                                    "dataset_rows",
                                    (unsigned long long)v.dataset_rows,
                                    "object", v.object, "query", v.query);
        if (!d || PyList_Append(list, d)) {
            Py_XDECREF(d);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(d);
    }
    return list;
}

static PyObject *Dataset_get_url(Dataset *self, void *c)
{
    (void)c;
    return need_ds(self) ? NULL : PyUnicode_FromString(dlk_dataset_url(self->ds));
}

static PyObject *Dataset_get_id(Dataset *self, void *c)
{
    (void)c;
    return need_ds(self) ? NULL : PyUnicode_FromString(dlk_dataset_id(self->ds));
}

static PyObject *Dataset_get_head(Dataset *self, void *c)
{
    (void)c;
    if (need_ds(self))
        return NULL;
    const char *h = dlk_dataset_head(self->ds);
    return h ? PyUnicode_FromString(h) : Py_NewRef(Py_None);
}

/* ---- Index: a resident vector index -------------------------------- */

typedef struct {
    PyObject_HEAD
    dlk_index *ix;
    pthread_mutex_t mu; /* a search at a time */
} Index;

static void Index_close_now(Index *self)
{
    if (self->ix) {
        dlk_index *ix = self->ix;
        self->ix = NULL;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&self->mu);
        dlk_index_close(ix);
        pthread_mutex_unlock(&self->mu);
        Py_END_ALLOW_THREADS
    }
}

static void Index_dealloc(Index *self)
{
    Index_close_now(self);
    pthread_mutex_destroy(&self->mu);
    free_object(self);
}

static int need_ix(Index *self)
{
    if (!self->ix) {
        PyErr_SetString(PyExc_ValueError, "index is closed");
        return -1;
    }
    return 0;
}

/* search(queries, nq, k, metric) -> (rows bytes, scores bytes, n):
 * queries are nq x dim float32 values (C order); nq x k u64 rows and
 * f64 scores, n of each query's valid. */
static PyObject *Index_search(Index *self, PyObject *args)
{
    Py_buffer q;
    unsigned int nq, k;
    const char *mname;
    if (!PyArg_ParseTuple(args, "y*IIs", &q, &nq, &k, &mname))
        return NULL;
    dlk_metric metric;
    PyObject *res = NULL;
    if (need_ix(self)) {
        /* raised */
    } else if (dlk_metric_parse(mname, &metric)) {
        PyErr_Format(PyExc_ValueError, "unknown metric '%s' (cosine, l2 or "
                     "ip)", mname);
    } else if (!nq || !k || k > 1000000) {
        PyErr_Format(PyExc_ValueError, "a search takes one query or more and "
                     "k from 1 to 1000000 (%u queries, k %u)", nq, k);
    } else if ((size_t)q.len != (size_t)nq * dlk_index_dim(self->ix) *
                                    sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "%zd bytes of queries; %u queries of "
                     "%u float32 values are %zu", q.len, nq,
                     dlk_index_dim(self->ix),
                     (size_t)nq * dlk_index_dim(self->ix) * sizeof(float));
    } else {
        PyObject *rb = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nq * k * 8);
        PyObject *sb = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nq * k * 8);
        uint32_t got = 0;
        dlk_error err;
        dlk_status rc = DLK_OK;
        int closed = 0;
        if (rb && sb) {
            uint64_t *rows = (uint64_t *)PyBytes_AsString(rb);
            double *scores = (double *)PyBytes_AsString(sb);
            memset(rows, 0, (size_t)nq * k * 8);
            memset(scores, 0, (size_t)nq * k * 8);
            Py_BEGIN_ALLOW_THREADS
            pthread_mutex_lock(&self->mu);
            /* closed by another thread meanwhile */
            closed = !self->ix;
            if (!closed)
                rc = dlk_index_search(self->ix, q.buf, nq, k, metric, rows,
                                      scores, &got, &err);
            pthread_mutex_unlock(&self->mu);
            Py_END_ALLOW_THREADS
            if (closed)
                need_ix(self);
            else if (rc)
                raise_dlk(&err);
            else
                res = Py_BuildValue("(OOI)", rb, sb, got);
        }
        Py_XDECREF(rb);
        Py_XDECREF(sb);
    }
    PyBuffer_Release(&q);
    return res;
}

static PyObject *Index_close(Index *self, PyObject *noargs)
{
    (void)noargs;
    Index_close_now(self);
    Py_RETURN_NONE;
}

/* info() -> {rows, dim, nbytes, device} */
static PyObject *Index_info(Index *self, PyObject *noargs)
{
    (void)noargs;
    if (need_ix(self))
        return NULL;
    return Py_BuildValue(
        "{s:K,s:I,s:K,s:s}", "rows", (unsigned long long)dlk_index_rows(self->ix),
        "dim", dlk_index_dim(self->ix),
        "nbytes", (unsigned long long)dlk_index_bytes(self->ix), "device",
        dlk_query_device_name(dlk_index_device(self->ix)));
}

static PyMethodDef Index_methods[] = {
    {"search", (PyCFunction)Index_search, METH_VARARGS,
     "search(queries, nq, k, metric) -> (rows bytes, scores bytes, n)"},
    {"close", (PyCFunction)Index_close, METH_NOARGS,
     "free the rows (on the GPU too)"},
    {"info", (PyCFunction)Index_info, METH_NOARGS,
     "{rows, dim, nbytes, device}"},
    {NULL, NULL, 0, NULL},
};

/* the types are not made from Python (nor changed), as static types were not */
#define NOT_MADE_HERE (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | \
                       Py_TPFLAGS_DISALLOW_INSTANTIATION)

static PyType_Slot Index_slots[] = {
    {Py_tp_dealloc, (void *)Index_dealloc},
    {Py_tp_methods, Index_methods},
    {0, NULL},
};

static PyType_Spec Index_spec = {
    "dlk._core.Index", sizeof(Index), 0, NOT_MADE_HERE, Index_slots,
};

/* index(tensor, where=None, view=None, device="auto", threads=0,
 * verify=True) -> Index: the rows read once, kept in host or GPU
 * memory. */
static PyObject *Dataset_index(Dataset *self, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"tensor", "where", "view", "device", "threads",
                          "verify", NULL};
    const char *tensor, *where = NULL, *view = NULL, *dev = "auto";
    unsigned int threads = 0;
    int verify = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zzsIp", kws, &tensor,
                                     &where, &view, &dev, &threads, &verify))
        return NULL;
    if (need_ds(self))
        return NULL;
    dlk_index_opts o = {.size = sizeof(dlk_index_opts),
        .tensor = tensor, .where = where, .view = view,
        .threads = threads, .no_verify = !verify,
    };
    if (dlk_query_device_parse(dev, &o.device)) {
        PyErr_Format(PyExc_ValueError, "unknown device '%s' (auto, cpu or "
                     "cuda)", dev);
        return NULL;
    }
    Index *ix = PyObject_New(Index, IndexType);
    if (!ix)
        return NULL;
    ix->ix = NULL;
    pthread_mutex_init(&ix->mu, NULL);
    dlk_error err;
    dlk_status rc;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    rc = dlk_index_open(self->ds, &o, &ix->ix, &err);
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(ix);
        return raise_dlk(&err);
    }
    return (PyObject *)ix;
}

static PyMethodDef Dataset_methods[] = {
    {"index", (PyCFunction)(void (*)(void))Dataset_index,
     METH_VARARGS | METH_KEYWORDS,
     "index(tensor, where=None, view=None, device='auto', threads=0, "
     "verify=True) -> Index"},
    {"tensors", (PyCFunction)Dataset_tensors, METH_NOARGS,
     "the tensors: a list of dicts"},
    {"read", (PyCFunction)Dataset_read, METH_VARARGS,
     "read(tensor_index, row) -> (dtype, shape, bytes)"},
    {"log", (PyCFunction)Dataset_log, METH_VARARGS,
     "log(at=None, max=0) -> list of commits, newest first"},
    {"view_rows", (PyCFunction)Dataset_view_rows, METH_VARARGS,
     "view_rows(name) -> bytes of little-endian u64 rows"},
    {"views", (PyCFunction)Dataset_views, METH_NOARGS,
     "the views: a list of dicts"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Dataset_getset[] = {
    {"url", (getter)Dataset_get_url, NULL, "the dataset's URL", NULL},
    {"id", (getter)Dataset_get_id, NULL, "the dataset's id", NULL},
    {"head", (getter)Dataset_get_head, NULL, "the commit id, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Dataset_slots[] = {
    {Py_tp_new, (void *)Dataset_new},
    {Py_tp_init, (void *)Dataset_init},
    {Py_tp_dealloc, (void *)Dataset_dealloc},
    {Py_tp_methods, Dataset_methods},
    {Py_tp_getset, Dataset_getset},
    {0, NULL},
};

static PyType_Spec Dataset_spec = {
    "dlk._core.Dataset", sizeof(Dataset), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE,
    Dataset_slots,
};

/* ---- Loader -------------------------------------------------------- */

typedef struct Loader {
    PyObject_HEAD
    Dataset *ds;
    PyObject *mix;          /* a mix's sources: a tuple of (Dataset,
                               weight, view or None); NULL for one */
    dlk_loader *l;
    int device_type, device_id;
    /* the loader handle is used under mu only; the GIL is dropped while
     * it is held across a wait */
    pthread_mutex_t mu;
    Py_ssize_t nkept;       /* kept batches alive */
    int closing;            /* close() came while batches were alive */
    PyObject *bad;          /* failed reads told since the last take_bad():
                               a list of dicts */
} Loader;

/* The memory of one batch, kept while any of its tensors lives. */
typedef struct {
    PyObject_HEAD
    Loader *loader;
    dlk_kept *k;
    void *stream;           /* the consumer's CUDA stream, for release */
    int ordered;            /* `stream` already waits for the batch (the
                               samples of a variable-shape tensor share it) */
} Kept;

static void loader_close_now(Loader *self)
{
    if (self->l) {
        dlk_loader *l = self->l;
        self->l = NULL;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&self->mu);
        dlk_loader_close(l); /* stops the I/O threads */
        pthread_mutex_unlock(&self->mu);
        Py_END_ALLOW_THREADS
    }
}

static void Kept_dealloc(Kept *self)
{
    Loader *L = self->loader;
    if (L && L->l && self->k) {
        /* the lock is taken without the GIL: the thread in next() holds
         * it across its wait and needs no GIL to let go */
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&L->mu);
        dlk_loader_release(L->l, self->k, self->stream);
        pthread_mutex_unlock(&L->mu);
        Py_END_ALLOW_THREADS
    }
    if (L) {
        L->nkept--;
        if (L->closing && L->nkept == 0)
            loader_close_now(L);
        Py_DECREF(L);
    }
    free_object(self);
}

static PyType_Slot Kept_slots[] = {
    {Py_tp_dealloc, (void *)Kept_dealloc},
    {0, NULL},
};

static PyType_Spec Kept_spec = {
    "dlk._core.Kept", sizeof(Kept), 0, NOT_MADE_HERE, Kept_slots,
};

static PyObject *Loader_new(PyTypeObject *type, PyObject *a, PyObject *k)
{
    (void)a;
    (void)k;
    Loader *self = (Loader *)alloc_object(type);
    if (self)
        pthread_mutex_init(&self->mu, NULL);
    return (PyObject *)self;
}

static void Loader_dealloc(Loader *self)
{
    if (!exiting)
        loader_close_now(self); /* no Kept refers to it any more */
    pthread_mutex_destroy(&self->mu);
    /* a loader left open at exit still reads through its dataset on its
     * I/O threads until the process ends: the dataset must outlive it
     * (freeing it here crashed such a process now and then) */
    if (!self->l) {
        Py_XDECREF((PyObject *)self->ds);
        Py_XDECREF(self->mix);
    }
    Py_XDECREF(self->bad); /* told only within next() */
    free_object(self);
}

/* The loader asks this while it waits for data: Ctrl-C (or any signal
 * handler that raises) stops the wait, its exception pending. */
static int check_signals(void *ud)
{
    (void)ud;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = PyErr_CheckSignals() < 0;
    PyGILState_Release(g);
    return stop;
}

/* A failed read whose rows were replaced (on_bad skip): on the thread in
 * next(), which holds no GIL there; kept for take_bad(). */
static void on_bad_read(void *ud, const dlk_bad_read *b)
{
    Loader *self = ud;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* a signal's exception stays pending */
    PyObject *d = Py_BuildValue(
        "{s:s,s:s,s:I,s:I,s:K,s:K,s:K,s:i,s:s}", "tensor", b->tensor,
        "object", b->object, "part0", b->part0, "part1", b->part1,
        "first_row", (unsigned long long)b->first_row, "rows",
        (unsigned long long)b->rows, "epoch", (unsigned long long)b->epoch,
        "code", (int)b->code, "why", b->why);
    /* out of memory here loses the report, not the count in stats() */
    if (!d || PyList_Append(self->bad, d) < 0)
        PyErr_Clear();
    Py_XDECREF(d);
    PyErr_Restore(et, ev, tb);
    PyGILState_Release(g);
}

/* A mix's sources, read from a tuple of (Dataset, weight, view or None)
 * (n 0 when `o` is not a tuple); -1 with an exception when malformed. */
struct mix_args {
    size_t n;
    Dataset **ds;
    dlk_dataset **handles;
    double *w;
    const char **views;
};

static void mix_args_free(struct mix_args *m)
{
    PyMem_Free(m->ds);
    PyMem_Free(m->handles);
    PyMem_Free(m->w);
    PyMem_Free(m->views);
    memset(m, 0, sizeof *m);
}

static int mix_args_get(PyObject *o, struct mix_args *m)
{
    memset(m, 0, sizeof *m);
    if (!PyTuple_Check(o))
        return 0;
    size_t n = (size_t)PyTuple_Size(o);
    if (n < 1 || n > 1024) {
        PyErr_SetString(PyExc_ValueError, "a mix of 1 to 1024 sources");
        return -1;
    }
    m->ds = PyMem_Calloc(n, sizeof *m->ds);
    m->handles = PyMem_Calloc(n, sizeof *m->handles);
    m->w = PyMem_Calloc(n, sizeof *m->w);
    m->views = PyMem_Calloc(n, sizeof *m->views);
    if (!m->ds || !m->handles || !m->w || !m->views) {
        mix_args_free(m);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GetItem(o, (Py_ssize_t)i), *d, *v;
        double w;
        if (!PyArg_ParseTuple(it, "O!dO", DatasetType, &d, &w, &v) ||
            need_ds((Dataset *)d) ||
            (v != Py_None &&
             !(m->views[i] = PyUnicode_AsUTF8AndSize(v, NULL)))) {
            mix_args_free(m);
            return -1;
        }
        m->ds[i] = (Dataset *)d;
        m->handles[i] = m->ds[i]->ds;
        m->w[i] = w;
    }
    m->n = n;
    return 0;
}

/* Loader(dataset, device, batch_size, shuffle, seed, tensors, epochs,
 *        drop_last, rank, world_size, memory, workers, window, prefetch,
 *        verify, state_json, view, whole_chunks, local_world_size,
 *        pin_cache, on_bad, max_bad, cache_dir, cache_limit, augment,
 *        augment_tensor) -
 * every option explicit;
 * dlk/__init__.py supplies the defaults. */
struct loader_args {
    PyObject *dso, *tensors;
    const char *device, *state, *view, *cache_dir;
    const char *augment, *augment_tensor;
    unsigned int batch, rank, world, workers, window, prefetch, local_world;
    int shuffle, drop_last, verify, whole_chunks, skip;
    unsigned long long seed, epochs, memory, pin_cache, max_bad, cache_limit,
        epoch_size;
};

/* Loader()'s arguments into *a; 0, else -1 with the exception set. */
static int loader_args_parse(PyObject *args, PyObject *kw,
                             struct loader_args *a)
{
    static char *kws[] = {"dataset", "device", "batch_size", "shuffle",
                          "seed", "tensors", "epochs", "drop_last", "rank",
                          "world_size", "memory", "workers", "window",
                          "prefetch", "verify", "state", "view",
                          "whole_chunks", "local_world_size", "pin_cache",
                          "on_bad", "max_bad", "cache_dir", "cache_limit",
                          "epoch_size", "augment", "augment_tensor", NULL};
    *a = (struct loader_args){.tensors = Py_None, .batch = 256, .world = 1,
                              .local_world = 1, .shuffle = 1, .verify = 1};
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "Os|IpKOKpIIKIIIpzzpIKpKzKKzz", kws, &a->dso,
            &a->device, &a->batch, &a->shuffle, &a->seed, &a->tensors,
            &a->epochs, &a->drop_last, &a->rank, &a->world, &a->memory,
            &a->workers, &a->window, &a->prefetch, &a->verify, &a->state,
            &a->view, &a->whole_chunks, &a->local_world, &a->pin_cache,
            &a->skip, &a->max_bad, &a->cache_dir, &a->cache_limit,
            &a->epoch_size, &a->augment, &a->augment_tensor))
        return -1;
    return 0;
}

/* The loader's options that its arguments give. */
static void loader_opts(const struct loader_args *a, dlk_loader_opts *o)
{
    o->batch_size = a->batch;
    o->shuffle = a->shuffle;
    o->seed = a->seed;
    o->epochs = a->epochs;
    o->drop_last = a->drop_last;
    o->rank = a->rank;
    o->world_size = a->world;
    o->local_world_size = a->local_world;
    o->memory_limit = a->memory;
    o->pin_cache = a->pin_cache; /* UINT64_MAX: DLK_PIN_CACHE_AUTO */
    o->io_threads = a->workers;
    o->window_chunks = a->window;
    o->prefetch_chunks = a->prefetch;
    o->no_verify = !a->verify;
    o->whole_chunks = a->whole_chunks;
    o->device = a->device;
    o->view = a->view;
    o->cache_dir = a->cache_dir;
    o->cache_limit = a->cache_limit;
    o->augment = a->augment;
    o->augment_tensor = a->augment_tensor;
    o->cancel = check_signals;
    o->on_bad = a->skip ? DLK_ON_BAD_SKIP : DLK_ON_BAD_FAIL;
    o->max_bad = a->max_bad;
    o->epoch_size = a->epoch_size;
}

/* The dataset argument: a Dataset (*ds), or a mix's sources (*mx, *ds
 * the first); kept as self->ds and self->mix.  0, else -1 with the
 * exception set. */
static int take_dataset(Loader *self, PyObject *dso, struct mix_args *mx,
                        Dataset **ds)
{
    if (mix_args_get(dso, mx) < 0)
        return -1;
    *ds = mx->n ? mx->ds[0] : (Dataset *)dso;
    if (!mx->n && (!PyObject_TypeCheck(dso, DatasetType) || need_ds(*ds))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "dataset must be a Dataset or "
                            "a tuple of (Dataset, weight, view) sources");
        return -1;
    }
    Dataset *old = self->ds;
    self->ds = (Dataset *)Py_NewRef((PyObject *)*ds);
    Py_XDECREF((PyObject *)old);
    PyObject *old_mix = self->mix;
    self->mix = mx->n ? Py_NewRef(dso) : NULL;
    Py_XDECREF(old_mix);
    return 0;
}

/* o->tensors from a sequence of names, at most 256: names[] point into
 * *seq, which the caller holds while they are used.  0, else -1 with
 * the exception set. */
static int tensor_names(PyObject *tensors, const char **names,
                        PyObject **seq, dlk_loader_opts *o)
{
    /* a tuple of them: the names' UTF-8 stays valid while it lives,
     * whatever another thread does to the caller's list meanwhile */
    PyObject *fast = PySequence_Fast(tensors,
                                     "tensors must be a list of names");
    *seq = fast ? PySequence_Tuple(fast) : NULL;
    Py_XDECREF(fast);
    if (!*seq)
        return -1;
    Py_ssize_t n = PyTuple_Size(*seq);
    if (n > 256) {
        Py_CLEAR(*seq);
        PyErr_SetString(PyExc_ValueError, "at most 256 tensors");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        names[i] = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(*seq, i), NULL);
        if (!names[i]) {
            Py_CLEAR(*seq);
            return -1;
        }
    }
    o->tensors = names;
    o->ntensors = (size_t)n;
    return 0;
}

/* self->l opened without the GIL, its datasets locked meanwhile; one
 * dataset's loader starts at *st when a state is given. */
static dlk_status open_loader(Loader *self, Dataset *ds,
                              const struct mix_args *mx, const char *state,
                              const dlk_loader_state *st, dlk_loader_opts *o,
                              dlk_error *err)
{
    dlk_status rc;
    Py_BEGIN_ALLOW_THREADS
    if (mx->n) {
        /* a mix continues from its whole state after its open */
        for (size_t i = 0; i < mx->n; i++)
            pthread_mutex_lock(&mx->ds[i]->mu);
        rc = dlk_loader_open_mix(mx->handles, mx->w, mx->views, mx->n, o,
                                 &self->l, err);
        if (!rc && state && (rc = dlk_loader_load(self->l, state, err))) {
            dlk_loader_close(self->l);
            self->l = NULL;
        }
        for (size_t i = mx->n; i-- > 0;)
            pthread_mutex_unlock(&mx->ds[i]->mu);
    } else {
        pthread_mutex_lock(&ds->mu);
        if (state)
            o->start = st; /* read from the start, not restored after it */
        rc = dlk_loader_open(ds->ds, o, &self->l, err);
        pthread_mutex_unlock(&ds->mu);
    }
    Py_END_ALLOW_THREADS
    return rc;
}

/* Where the loader's batches are, as DLPack names it: "cuda[:N]" or
 * the CPU. */
static void set_device(Loader *self, const char *device)
{
    self->device_type = kDLCPU;
    self->device_id = 0;
    if (strncmp(device, "cuda", 4) == 0) {
        self->device_type = kDLCUDA;
        self->device_id = device[4] == ':' ? atoi(device + 5) : 0;
    }
}

static int Loader_init(Loader *self, PyObject *args, PyObject *kw)
{
    struct loader_args a;
    if (loader_args_parse(args, kw, &a) < 0)
        return -1;
    if (self->l) {
        PyErr_SetString(PyExc_RuntimeError, "loader already open");
        return -1;
    }
    struct mix_args mx;
    Dataset *ds;
    if (take_dataset(self, a.dso, &mx, &ds) < 0)
        return -1;
    dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
    loader_opts(&a, &o);
    if (!self->bad && !(self->bad = PyList_New(0))) {
        mix_args_free(&mx);
        return -1;
    }
    o.on_bad_read = on_bad_read;
    o.on_bad_ud = self;
    const char *names[256];
    PyObject *seq = NULL;
    if (a.tensors != Py_None && tensor_names(a.tensors, names, &seq, &o) < 0) {
        mix_args_free(&mx);
        return -1;
    }
    dlk_error err;
    dlk_loader_state st;
    if (a.state && !mx.n && dlk_loader_state_parse(a.state, &st, &err)) {
        Py_XDECREF(seq);
        raise_dlk(&err);
        return -1;
    }
    dlk_status rc = open_loader(self, ds, &mx, a.state, &st, &o, &err);
    mix_args_free(&mx);
    Py_XDECREF(seq);
    if (rc) {
        self->l = NULL;
        raise_dlk(&err);
        return -1;
    }
    set_device(self, a.device);
    return 0;
}

static int need_loader(Loader *self)
{
    if (!self->l || self->closing) {
        PyErr_SetString(PyExc_ValueError, "loader is closed");
        return -1;
    }
    return 0;
}

/* ---- batch tensors (DLPack producers) ------------------------------ */

typedef struct {
    PyObject_HEAD
    Kept *kept;             /* owns the memory */
    void *data;
    int ndim;
    int64_t shape[DLK_MAX_NDIM + 1];
    DLDataType dtype;
    const char *dtype_name;
    int device_type, device_id;
} Tensor;

static void Tensor_dealloc(Tensor *self)
{
    Py_XDECREF((PyObject *)self->kept);
    free_object(self);
}

static DLDataType dl_dtype(dlk_dtype t)
{
    DLDataType d = {kDLUInt, 8, 1};
    switch (t) {
    case DLK_U8: d.code = kDLUInt; d.bits = 8; break;
    case DLK_I8: d.code = kDLInt; d.bits = 8; break;
    case DLK_U16: d.code = kDLUInt; d.bits = 16; break;
    case DLK_I16: d.code = kDLInt; d.bits = 16; break;
    case DLK_U32: d.code = kDLUInt; d.bits = 32; break;
    case DLK_I32: d.code = kDLInt; d.bits = 32; break;
    case DLK_U64: d.code = kDLUInt; d.bits = 64; break;
    case DLK_I64: d.code = kDLInt; d.bits = 64; break;
    case DLK_F16: d.code = kDLFloat; d.bits = 16; break;
    case DLK_BF16: d.code = kDLBfloat; d.bits = 16; break;
    case DLK_F32: d.code = kDLFloat; d.bits = 32; break;
    case DLK_F64: d.code = kDLFloat; d.bits = 64; break;
    case DLK_BOOL: d.code = kDLBool; d.bits = 8; break;
    }
    return d;
}

/* What a capsule's DLManagedTensor points back to. */
typedef struct {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned v1;
    } m;
    int64_t shape[DLK_MAX_NDIM + 1];
    PyObject *owner;        /* the Tensor */
} Managed;

static void managed_free(Managed *mt)
{
    if (!mt)
        return;
    /* consumers may call the deleter from any thread, GIL or not */
    if (Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_XDECREF(mt->owner);
        PyGILState_Release(g);
    }
    free(mt);
}

static void deleter_legacy(DLManagedTensor *m) { managed_free(m->manager_ctx); }
static void deleter_v1(DLManagedTensorVersioned *m) { managed_free(m->manager_ctx); }

static void capsule_legacy(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "used_dltensor"))
        return; /* a consumer took it and owns the deleter */
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter)
        m->deleter(m);
    else
        PyErr_Clear();
}

static void capsule_v1(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "used_dltensor_versioned"))
        return;
    DLManagedTensorVersioned *m =
        PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m && m->deleter)
        m->deleter(m);
    else
        PyErr_Clear();
}

/* The DLPack contract on a GPU: the consumer's stream waits for ours.
 * None means the legacy default stream; -1: no ordering asked.  -1 with
 * an exception set where it cannot. */
static int order_stream(Tensor *self, PyObject *stream)
{
    long long s = 1;
    if (stream != Py_None && (s = PyLong_AsLongLong(stream)) == -1 &&
        PyErr_Occurred())
        return -1;
    void *cs = s == 1 ? NULL : (void *)(intptr_t)s;
    if (s == -1 || (self->kept->ordered && self->kept->stream == cs))
        return 0;
    Loader *L = self->kept->loader;
    dlk_error err;
    dlk_status rc = DLK_OK;
    if (L->l) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&L->mu);
        rc = dlk_loader_stream_wait(L->l, cs, &err);
        pthread_mutex_unlock(&L->mu);
        Py_END_ALLOW_THREADS
    }
    if (rc) {
        raise_dlk(&err);
        return -1;
    }
    self->kept->stream = cs; /* what reads the memory last */
    self->kept->ordered = 1;
    return 0;
}

/* __dlpack__(stream=None, max_version=None, dl_device=None, copy=None) */
static PyObject *Tensor_dlpack(Tensor *self, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None,
             *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kws, &stream,
                                     &max_version, &dl_device, &copy))
        return NULL;
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError, "dlk batches are shared, not "
                        "copied (copy=True is not supported)");
        return NULL;
    }
    if (dl_device != Py_None) {
        int dt, di;
        if (!PyArg_ParseTuple(dl_device, "ii", &dt, &di))
            return NULL;
        if (dt != self->device_type || di != self->device_id) {
            PyErr_SetString(PyExc_BufferError, "the batch is on another "
                            "device (copy it there with the framework)");
            return NULL;
        }
    }
    if (self->device_type == kDLCUDA && order_stream(self, stream) < 0)
        return NULL;
    int versioned = 0;
    if (max_version != Py_None) {
        long major = PyLong_AsLong(PyTuple_GetItem(max_version, 0));
        if (PyErr_Occurred())
            return NULL;
        versioned = major >= 1;
    }
    /* the C allocator: the deleter may run without the GIL */
    Managed *mt = calloc(1, sizeof *mt);
    if (!mt)
        return PyErr_NoMemory();
    memcpy(mt->shape, self->shape, sizeof mt->shape);
    DLTensor t = {self->data, {self->device_type, self->device_id},
                  self->ndim, self->dtype, mt->shape, NULL, 0};
    mt->owner = Py_NewRef((PyObject *)self);
    PyObject *cap;
    if (versioned) {
        mt->m.v1.version.major = 1;
        mt->m.v1.version.minor = 0;
        mt->m.v1.manager_ctx = mt;
        mt->m.v1.deleter = deleter_v1;
        mt->m.v1.dl_tensor = t;
        cap = PyCapsule_New(&mt->m.v1, "dltensor_versioned", capsule_v1);
    } else {
        mt->m.legacy.dl_tensor = t;
        mt->m.legacy.manager_ctx = mt;
        mt->m.legacy.deleter = deleter_legacy;
        cap = PyCapsule_New(&mt->m.legacy, "dltensor", capsule_legacy);
    }
    if (!cap) {
        Py_DECREF(mt->owner);
        free(mt);
    }
    return cap;
}

static PyObject *Tensor_dlpack_device(Tensor *self, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(ii)", self->device_type, self->device_id);
}

static PyObject *Tensor_get_shape(Tensor *self, void *c)
{
    (void)c;
    return dims(self->ndim, self->shape);
}

static PyObject *Tensor_get_dtype(Tensor *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(self->dtype_name);
}

static PyObject *Tensor_get_device(Tensor *self, void *c)
{
    (void)c;
    return self->device_type == kDLCUDA
               ? PyUnicode_FromFormat("cuda:%d", self->device_id)
               : PyUnicode_FromString("cpu");
}

static PyObject *Tensor_get_ptr(Tensor *self, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(self->data);
}

static PyObject *Tensor_repr(Tensor *self)
{
    PyObject *shape = dims(self->ndim, self->shape);
    PyObject *dev = Tensor_get_device(self, NULL);
    PyObject *r = shape && dev ? PyUnicode_FromFormat("dlk.Tensor(%s, %R, %U)",
                                                      self->dtype_name, shape,
                                                      dev)
                               : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(dev);
    return r;
}

static PyMethodDef Tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))Tensor_dlpack,
     METH_VARARGS | METH_KEYWORDS, "a DLPack capsule of the memory"},
    {"__dlpack_device__", (PyCFunction)Tensor_dlpack_device, METH_NOARGS,
     "(device type, device id) as DLPack numbers them"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Tensor_getset[] = {
    {"shape", (getter)Tensor_get_shape, NULL, "shape", NULL},
    {"dtype", (getter)Tensor_get_dtype, NULL, "dlk dtype name", NULL},
    {"device", (getter)Tensor_get_device, NULL, "cpu or cuda:N", NULL},
    {"data_ptr", (getter)Tensor_get_ptr, NULL, "address of the data", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Tensor_slots[] = {
    {Py_tp_doc, "A tensor of a batch: pass it to numpy.from_dlpack, "
                "torch.from_dlpack or jax.dlpack.from_dlpack (no copy)."},
    {Py_tp_dealloc, (void *)Tensor_dealloc},
    {Py_tp_methods, Tensor_methods},
    {Py_tp_getset, Tensor_getset},
    {Py_tp_repr, (void *)Tensor_repr},
    {0, NULL},
};

static PyType_Spec Tensor_spec = {
    "dlk.Tensor", sizeof(Tensor), 0, NOT_MADE_HERE, Tensor_slots,
};

static Tensor *new_tensor(Loader *L, Kept *k, const dlk_batch_tensor *bt,
                          void *data, int ndim, const int64_t *shape)
{
    Tensor *t = PyObject_New(Tensor, TensorType);
    if (!t)
        return NULL;
    t->kept = (Kept *)Py_NewRef((PyObject *)k);
    t->data = data;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->dtype = dl_dtype(bt->dtype);
    t->dtype_name = dlk_dtype_name(bt->dtype);
    t->device_type = L->device_type;
    t->device_id = L->device_id;
    return t;
}

/* A kept batch's memory back to the loader. */
static void release_kept(Loader *self, dlk_kept *k)
{
    pthread_mutex_lock(&self->mu);
    dlk_loader_release(self->l, k, NULL);
    pthread_mutex_unlock(&self->mu);
}

/* The Python owner of the kept batch k, or NULL (k released). */
static Kept *new_kept(Loader *self, dlk_kept *k)
{
    Kept *kp = PyObject_New(Kept, KeptType);
    if (!kp) {
        release_kept(self, k);
        return NULL;
    }
    kp->loader = (Loader *)Py_NewRef((PyObject *)self);
    kp->k = k;
    kp->stream = NULL;
    kp->ordered = 0;
    self->nkept++;
    return kp;
}

/* A batch tensor's first `size` samples: a Tensor of them, or of a
 * variable shape a list of a Tensor per sample. */
static PyObject *batch_tensor(Loader *self, Kept *kp,
                              const dlk_batch_tensor *bt, uint32_t size)
{
    if (!bt->offsets) {
        int64_t shape[DLK_MAX_NDIM + 1];
        shape[0] = size;
        memcpy(shape + 1, bt->shape, (size_t)bt->ndim * sizeof *shape);
        return (PyObject *)new_tensor(self, kp, bt, bt->data, bt->ndim + 1,
                                      shape);
    }
    PyObject *v = PyList_New(size);
    for (uint32_t s = 0; v && s < size; s++) {
        PyObject *e = (PyObject *)new_tensor(
            self, kp, bt, (uint8_t *)bt->data + bt->offsets[s], bt->ndim,
            bt->shapes + (size_t)s * bt->ndim);
        if (!e)
            Py_CLEAR(v);
        else if (PyList_SetItem(v, s, e))
            Py_CLEAR(v);
    }
    return v;
}

/* {name: Tensor or [Tensor per sample]} of the batch's first `size`
 * samples. */
static PyObject *batch_tensors(Loader *self, Kept *kp, const dlk_batch *b,
                               uint32_t size)
{
    PyObject *tensors = PyDict_New();
    for (size_t i = 0; tensors && i < b->ntensors; i++) {
        const dlk_batch_tensor *bt = &b->tensors[i];
        PyObject *v = batch_tensor(self, kp, bt, size);
        if (!v || PyDict_SetItemString(tensors, bt->name, v))
            Py_CLEAR(tensors);
        Py_XDECREF(v);
    }
    return tensors;
}

/* next() -> None at the end of the epoch, else
 * (epoch, step, indices bytes (u64), pad bytes (u8), {name: Tensor or
 * [Tensor per sample]}) */
/* next(trim=False): with trim, the padding repeats at the end of a last
 * batch are left out (a short last batch, as a DataLoader gives on one
 * rank); its tensors are then views of the first samples of the batch's
 * memory, which is dense by sample. */
static PyObject *Loader_next(Loader *self, PyObject *args)
{
    int trim = 0;
    if (!PyArg_ParseTuple(args, "|p", &trim))
        return NULL;
    if (need_loader(self))
        return NULL;
    const dlk_batch *b = NULL;
    dlk_kept *k = NULL;
    dlk_error err;
    dlk_status rc;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    rc = dlk_loader_next(self->l, &b, &err);
    if (!rc && b)
        rc = dlk_loader_keep(self->l, &k, &err);
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    if (rc)
        return PyErr_Occurred() ? NULL : raise_dlk(&err); /* Ctrl-C */
    /* a signal that came as the batch did: stop here (its memory goes
     * back) */
    if (!b || PyErr_CheckSignals() < 0) {
        if (k)
            release_kept(self, k);
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    Kept *kp = new_kept(self, k);
    if (!kp)
        return NULL;
    uint32_t size = b->size;
    while (trim && size && b->pad[size - 1])
        size--;
    PyObject *tensors = batch_tensors(self, kp, b, size);
    Py_DECREF(kp);
    if (!tensors)
        return NULL;
    PyObject *srcs = b->sources
        ? PyBytes_FromStringAndSize((const char *)b->sources,
                                    (Py_ssize_t)(size * sizeof *b->sources))
        : Py_NewRef(Py_None);
    if (!srcs) {
        Py_DECREF(tensors);
        return NULL;
    }
    return Py_BuildValue("(KKy#y#NN)", (unsigned long long)b->epoch,
                         (unsigned long long)b->step, (const char *)b->indices,
                         (Py_ssize_t)(size * sizeof *b->indices),
                         (const char *)b->pad, (Py_ssize_t)size, tensors,
                         srcs);
}

static PyObject *Loader_batches(Loader *self, PyObject *unused)
{
    (void)unused;
    if (need_loader(self))
        return NULL;
    uint64_t n;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    n = dlk_loader_batches(self->l);
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong(n);
}

static PyObject *Loader_state(Loader *self, PyObject *unused)
{
    (void)unused;
    if (need_loader(self))
        return NULL;
    pthread_mutex_lock(&self->mu);
    char *j = dlk_loader_save(self->l);
    pthread_mutex_unlock(&self->mu);
    if (!j)
        return PyErr_NoMemory();
    PyObject *r = PyUnicode_FromString(j);
    free(j);
    return r;
}

static PyObject *Loader_restore(Loader *self, PyObject *args)
{
    const char *json;
    if (!PyArg_ParseTuple(args, "s", &json) || need_loader(self))
        return NULL;
    dlk_error err;
    dlk_status rc;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    rc = dlk_loader_load(self->l, json, &err);
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_dlk(&err);
    Py_RETURN_NONE;
}

static PyObject *Loader_stats(Loader *self, PyObject *unused)
{
    (void)unused;
    if (need_loader(self))
        return NULL;
    dlk_loader_stats s = DLK_LOADER_STATS_INIT;
    pthread_mutex_lock(&self->mu);
    dlk_loader_stats_get(self->l, &s);
    pthread_mutex_unlock(&self->mu);
    return Py_BuildValue(
        "{s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:K,s:K,s:K,s:K,s:K,s:K,s:K,"
        "s:K,s:I,s:K,s:K,s:O,s:K,s:K,s:K,s:K,s:K,s:s}",
        "storage_s", s.storage_s, "decompress_s", s.decompress_s, "h2d_s",
        s.h2d_s, "gather_s", s.gather_s, "wait_s", s.wait_s,
        "first_batch_s", s.first_batch_s, "gpu_busy_s", s.gpu_busy_s,
        "io_busy_s", s.io_busy_s, "io_cpu_s", s.io_cpu_s, "pin_s", s.pin_s,
        "chunks_pinned", (unsigned long long)s.chunks_pinned,
        "chunks_shared", (unsigned long long)s.chunks_shared, "chunks_loaded",
        (unsigned long long)s.chunks_loaded, "chunks_verified",
        (unsigned long long)s.chunks_verified, "bytes_loaded",
        (unsigned long long)s.bytes_loaded, "samples",
        (unsigned long long)s.samples, "batches",
        (unsigned long long)s.batches, "peak_buffer_bytes",
        (unsigned long long)s.peak_buffer_bytes, "io_threads", s.io_threads,
        "reads_bad", (unsigned long long)s.reads_bad, "rows_replaced",
        (unsigned long long)s.rows_replaced,
        "cache_on", s.cache_on ? Py_True : Py_False, "cache_hits",
        (unsigned long long)s.cache_hits, "cache_fetched",
        (unsigned long long)s.cache_fetched, "cache_evicted",
        (unsigned long long)s.cache_evicted, "cache_dropped",
        (unsigned long long)s.cache_dropped, "cache_limit",
        (unsigned long long)s.cache_limit, "cache_warning", s.cache_warning);
}

/* take_bad(): the failed reads told since the last call (dicts). */
static PyObject *Loader_take_bad(Loader *self, PyObject *unused)
{
    (void)unused;
    PyObject *fresh = PyList_New(0);
    if (!fresh)
        return NULL;
    if (!self->bad)
        return fresh;
    PyObject *out = self->bad;
    self->bad = fresh;
    return out;
}

static PyObject *Loader_close(Loader *self, PyObject *unused)
{
    (void)unused;
    /* batches still held keep their memory: the loader closes when the
     * last of them goes */
    self->closing = 1;
    if (self->nkept == 0)
        loader_close_now(self);
    Py_RETURN_NONE;
}

static PyMethodDef Loader_methods[] = {
    {"next", (PyCFunction)Loader_next, METH_VARARGS,
     "the next batch or None (trim: without a last batch's padding)"},
    {"batches", (PyCFunction)Loader_batches, METH_NOARGS,
     "batches of this rank in the current epoch"},
    {"state", (PyCFunction)Loader_state, METH_NOARGS, "the state as JSON"},
    {"restore", (PyCFunction)Loader_restore, METH_VARARGS,
     "continue from a state (JSON)"},
    {"stats", (PyCFunction)Loader_stats, METH_NOARGS, "where time went"},
    {"take_bad", (PyCFunction)Loader_take_bad, METH_NOARGS,
     "failed reads whose rows were replaced, since the last call"},
    {"close", (PyCFunction)Loader_close, METH_NOARGS, "stop the loader"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Loader_slots[] = {
    {Py_tp_new, (void *)Loader_new},
    {Py_tp_init, (void *)Loader_init},
    {Py_tp_dealloc, (void *)Loader_dealloc},
    {Py_tp_methods, Loader_methods},
    {0, NULL},
};

static PyType_Spec Loader_spec = {
    "dlk._core.Loader", sizeof(Loader), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE,
    Loader_slots,
};

/* ---- module functions ---------------------------------------------- */

/* The launcher's placement into *l, for the local rank (its GPU): a
 * world whose rank is not known does not matter there; -1 with the
 * exception set. */
static int launch(dlk_launch *l)
{
    dlk_error err;
    if (dlk_launch_env(l, &err) && l->rank != DLK_LAUNCH_NO_RANK) {
        raise_dlk(&err);
        return -1;
    }
    return 0;
}

/* launch_env(need_rank=True): a world whose rank cannot be known raises
 * only where the caller needs the rank; else its rank comes as None. */
static PyObject *launch_env(PyObject *m, PyObject *args)
{
    (void)m;
    int need = 1;
    if (!PyArg_ParseTuple(args, "|p", &need))
        return NULL;
    dlk_launch l;
    dlk_error err;
    if (dlk_launch_env(&l, &err)) {
        if (need || l.rank != DLK_LAUNCH_NO_RANK)
            return raise_dlk(&err);
        return Py_BuildValue("(OIII)", Py_None, l.world_size, l.local_rank,
                             l.local_world_size);
    }
    return Py_BuildValue("(IIII)", l.rank, l.world_size, l.local_rank,
                         l.local_world_size);
}

static PyObject *local_gpu(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    dlk_launch l;
    if (launch(&l))
        return NULL;
    int g = dlk_launch_gpu(&l, dlk_cuda_available(NULL, 0));
    if (g < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(g);
}

static PyObject *cuda_available(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    char why[256] = "";
    int ok = dlk_cuda_available(why, sizeof why);
    return Py_BuildValue("(Os)", ok ? Py_True : Py_False, why);
}

static PyObject *at_exit(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    exiting = 1;
    Py_RETURN_NONE;
}

static PyObject *version(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyUnicode_FromString(dlk_version_string());
}

/* ---- ingest of the caller's objects ------------------------------- */

/* What the callbacks of one ingest call gather, with the GIL taken in
 * each (they come from the calling thread, which dropped it, or from a
 * thread of the run; never two at once).  A failure to build an entry
 * is kept as the exception, raised once the call returns. */
typedef struct {
    PyObject *errors, *unused, *schema, *classes, *changed;
    int interrupted; /* a signal's handler raised (Ctrl-C): stop */
    int failed;      /* an exception is pending */
} ingest_cb;

static void cb_append(ingest_cb *c, PyObject *list, PyObject *item)
{
    if (!item || PyList_Append(list, item) < 0)
        c->failed = 1;
    Py_XDECREF(item);
}

static PyObject *key_reason(const char *key, const char *reason)
{
    return Py_BuildValue("{s:s,s:s}", "key", key ? key : "", "reason",
                         reason ? reason : "");
}

static void cb_bad(void *ud, const char *key, const char *reason)
{
    ingest_cb *c = ud;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!c->failed)
        cb_append(c, c->errors, key_reason(key, reason));
    PyGILState_Release(g);
}

static void cb_unused(void *ud, const char *key, const char *reason)
{
    ingest_cb *c = ud;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!c->failed)
        cb_append(c, c->unused, key_reason(key, reason));
    PyGILState_Release(g);
}

static void cb_changed(void *ud, const char *key)
{
    ingest_cb *c = ud;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!c->failed)
        cb_append(c, c->changed, PyUnicode_DecodeUTF8(key, strlen(key),
                                                      "backslashreplace"));
    PyGILState_Release(g);
}

static void cb_new_class(void *ud, const char *tensor, const char *name,
                         uint64_t id)
{
    ingest_cb *c = ud;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!c->failed)
        cb_append(c, c->classes,
                  Py_BuildValue("{s:s,s:s,s:K}", "tensor", tensor, "name",
                                name, "id", (unsigned long long)id));
    PyGILState_Release(g);
}

/* As `dlk ingest --json` gives a schema. */
static PyObject *spec_dict(const dlk_tensor_spec *t)
{
    PyObject *shape = PyList_New(0), *classes = PyList_New(0), *d = NULL;
    int bad = !shape || !classes;
    for (int i = 0; !bad && i < t->ndim; i++) {
        PyObject *v = t->shape[i] == DLK_DIM_VARIABLE
                          ? Py_NewRef(Py_None)
                          : PyLong_FromLongLong((long long)t->shape[i]);
        bad = !v || PyList_Append(shape, v) < 0;
        Py_XDECREF(v);
    }
    for (size_t k = 0; !bad && k < t->n_class_names; k++) {
        PyObject *v = PyUnicode_FromString(t->class_names[k]);
        bad = !v || PyList_Append(classes, v) < 0;
        Py_XDECREF(v);
    }
    if (!bad)
        d = Py_BuildValue("{s:s,s:s,s:O,s:s,s:s,s:O}", "name", t->name,
                          "dtype", dlk_dtype_name(t->dtype), "shape", shape,
                          "kind", dlk_kind_name(t->kind), "codec",
                          dlk_codec_name(t->codec), "classes", classes);
    Py_XDECREF(shape);
    Py_XDECREF(classes);
    return d;
}

static void cb_schema(void *ud, const dlk_tensor_spec *specs, size_t n)
{
    ingest_cb *c = ud;
    PyGILState_STATE g = PyGILState_Ensure();
    for (size_t i = 0; i < n && !c->failed; i++)
        cb_append(c, c->schema, spec_dict(&specs[i]));
    PyGILState_Release(g);
}

static int cb_stop(void *ud)
{
    ingest_cb *c = ud;
    if (c->interrupted)
        return 1;
    PyGILState_STATE g = PyGILState_Ensure();
    if (PyErr_CheckSignals() < 0) {
        /* KeyboardInterrupt: the run checkpoints and returns; raised then */
        c->interrupted = 1;
        c->failed = 1;
    }
    PyGILState_Release(g);
    return c->interrupted;
}

/* The result of an ingest call as a dict of the names `dlk ingest
 * --json` gives (with the callbacks' lists). */
static PyObject *ingest_result(const dlk_ingest_result *r,
                               const ingest_cb *cb, int dry_run)
{
    PyObject *out = Py_BuildValue(
        "{s:K,s:K,s:O,s:K,s:K,s:d,s:K,s:K,s:O,s:O,s:O,s:K,s:K,s:O,s:O,"
        "s:O,s:i,s:s,s:K,s:O,s:O,s:K,s:O,s:K}",
        "ingested", (unsigned long long)r->ingested,
        "skipped", (unsigned long long)r->skipped,
        "errors", cb->errors,
        "bytes_in", (unsigned long long)r->bytes_in,
        "bytes_out", (unsigned long long)r->bytes_out,
        "seconds", r->seconds,
        "resumed", (unsigned long long)r->resumed_rows,
        "planned", (unsigned long long)r->planned,
        "unused_objects", cb->unused,
        "schema", cb->schema,
        "classes_added", cb->classes,
        "unused", (unsigned long long)r->unused,
        "ignored", (unsigned long long)r->ignored,
        "dry_run", dry_run ? Py_True : Py_False,
        "complete", r->complete ? Py_True : Py_False,
        "already", r->already ? Py_True : Py_False,
        "jobs", r->jobs,
        "order", r->order == DLK_ORDER_SORTED ? "sorted" : "shuffled",
        "order_seed", (unsigned long long)r->order_seed,
        "keys", r->keyed ? Py_True : Py_False,
        "interrupted", r->interrupted ? Py_True : Py_False,
        "kept", (unsigned long long)r->kept,
        "rejected", r->rejected ? Py_True : Py_False,
        "shard_reads", (unsigned long long)r->shard_reads);
    if (out && r->keyed) {
        PyObject *a = PyLong_FromUnsignedLongLong(r->new_rows),
                 *b = PyLong_FromUnsignedLongLong(r->present),
                 *c = PyLong_FromUnsignedLongLong(r->changed);
        if (!a || !b || !c || PyDict_SetItemString(out, "new", a) < 0 ||
            PyDict_SetItemString(out, "present", b) < 0 ||
            PyDict_SetItemString(out, "changed", c) < 0 ||
            PyDict_SetItemString(out, "changed_keys", cb->changed) < 0)
            Py_CLEAR(out);
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
    }
    return out;
}

/* raise_dlk, the exception carrying `result` (its .result). */
static void raise_dlk_result(const dlk_error *err, PyObject *result)
{
    raise_dlk(err);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && PyObject_SetAttrString(value, "result", result) < 0)
        PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* _ingest(url, source, objects, create, width, height, fit, channels,
 * max_skip, dry_run, jobs, sorted, seed, no_key, exist_ok,
 * strict_classes, no_resume, shard, nshards, reader, tables): dlk_ingest
 * (or, create, dlk_ingest_create with the schema inferred) over objects,
 * a sequence of (key, version, bytes-like) that the call reads in place
 * or (key, version, None, size) that reader(index) returns the bytes of
 * when they are needed; tables: objects_in_tables.  The result as a dict
 * of the names `dlk ingest --json` gives. */
struct ingest_args {
    const char *url, *source;
    PyObject *seq;
    int create, width, height, fit, channels;
    int dry_run, jobs, sorted_, no_key, exist_ok;
    int strict, no_resume;
    unsigned int shard, nshards;
    double max_skip;
    unsigned long long seed;
    PyObject *reader;
    int tables;
};

/* _ingest()'s arguments into *a; 0, else -1 with the exception set. */
static int ingest_args_parse(PyObject *args, struct ingest_args *a)
{
    *a = (struct ingest_args){0};
    if (!PyArg_ParseTuple(args, "ssO|piiiidpipKppppIIOp", &a->url,
                          &a->source, &a->seq, &a->create, &a->width,
                          &a->height, &a->fit, &a->channels, &a->max_skip,
                          &a->dry_run, &a->jobs, &a->sorted_, &a->seed,
                          &a->no_key, &a->exist_ok, &a->strict, &a->no_resume,
                          &a->shard, &a->nshards, &a->reader, &a->tables))
        return -1;
    if (a->reader == Py_None)
        a->reader = NULL;
    if (a->reader && !PyCallable_Check(a->reader)) {
        PyErr_SetString(PyExc_TypeError, "reader is not callable");
        return -1;
    }
    return 0;
}

/* objs[] over the (key, version, bytes) tuples of items, read in place,
 * and (key, version, None, size) ones, read by the reader: *held counts
 * the items looked at, whose buffers (views[i].obj set) the caller
 * releases.  0, else -1 with the exception set. */
static int wrap_objects(PyObject *items, bool reader, dlk_ingest_object *objs,
                        Py_buffer *views, Py_ssize_t *held)
{
    Py_ssize_t n = PyTuple_Size(items);
    for (Py_ssize_t i = *held; i < n; i++) {
        PyObject *it = PyTuple_GetItem(items, i);
        Py_ssize_t w = PyTuple_Check(it) ? PyTuple_Size(it) : 0;
        bool later = w == 4 && reader && PyTuple_GetItem(it, 2) == Py_None;
        if (w != 3 && !later) {
            PyErr_Format(PyExc_TypeError, "object %zd: not a tuple (key, "
                         "version, bytes)%s", i,
                         reader ? " or (key, version, None, size)" : "");
            return -1;
        }
        objs[i].key = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(it, 0), NULL);
        objs[i].version =
            PyUnicode_AsUTF8AndSize(PyTuple_GetItem(it, 1), NULL);
        if (!objs[i].key || !objs[i].version)
            return -1;
        *held = i + 1;
        if (later) {
            size_t len = PyLong_AsSize_t(PyTuple_GetItem(it, 3));
            if (len == (size_t)-1 && PyErr_Occurred())
                return -1;
            objs[i].len = len;
            continue;
        }
        if (PyObject_GetBuffer(PyTuple_GetItem(it, 2), &views[i],
                               PyBUF_SIMPLE) < 0)
            return -1;
        objs[i].data = views[i].buf;
        objs[i].len = (size_t)views[i].len;
    }
    return 0;
}

/* dlk_ingest_opts.read_object: reader(index)'s bytes into dst, from one
 * of ingest's threads, under the GIL.  What the reader raised is the
 * reason given. */
static int read_object(void *ud, size_t index, void *dst, size_t len,
                       char *why, size_t why_size)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = -1;
    PyObject *got = PyObject_CallFunction((PyObject *)ud, "n",
                                          (Py_ssize_t)index);
    Py_buffer v;
    if (got && PyObject_GetBuffer(got, &v, PyBUF_SIMPLE) == 0) {
        if ((size_t)v.len == len) {
            memcpy(dst, v.buf, len);
            rc = 0;
        } else {
            snprintf(why, why_size, "%zd bytes, where its listing had %zu",
                     v.len, len);
        }
        PyBuffer_Release(&v);
    }
    Py_XDECREF(got);
    if (PyErr_Occurred()) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *name = type ? PyObject_GetAttrString(type, "__name__")
                              : NULL;
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *n = name ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
        const char *t = text ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
        snprintf(why, why_size, "%s%s%s", n ? n : "an exception",
                 t && *t ? ": " : "", t ? t : "");
        Py_XDECREF(name);
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
    }
    PyGILState_Release(g);
    return rc;
}

/* The ingest's options: its arguments, the n objects and the callbacks
 * that fill cb. */
static void ingest_opts(const struct ingest_args *a,
                        const dlk_ingest_object *objs, size_t n,
                        ingest_cb *cb, dlk_ingest_opts *o)
{
    o->source = a->source;
    o->objects = objs;
    o->n_objects = n;
    o->read_object = a->reader ? read_object : NULL;
    o->read_object_ud = a->reader;
    o->objects_in_tables = a->tables;
    o->width = a->width;
    o->height = a->height;
    o->fit = (dlk_fit)a->fit;
    o->channels = a->channels;
    o->max_skip = a->max_skip;
    o->dry_run = a->dry_run;
    o->jobs = a->jobs;
    o->order = a->sorted_ ? DLK_ORDER_SORTED : DLK_ORDER_SHUFFLED;
    o->order_seed = a->seed;
    o->no_key = a->no_key;
    o->exist_ok = a->exist_ok;
    o->strict_classes = a->strict;
    o->no_resume = a->no_resume;
    o->shard = a->shard;
    o->nshards = a->nshards;
    o->on_bad = cb_bad;
    o->on_unused = cb_unused;
    o->on_schema = cb_schema;
    o->on_changed_key = cb_changed;
    o->on_new_class = cb_new_class;
    o->stop = cb_stop;
    o->ud = cb;
}

/* The ingest (or, create, the ingest that makes the dataset), run
 * without the GIL. */
static dlk_status run_ingest(const struct ingest_args *a, dlk_ingest_opts *o,
                             dlk_ingest_result *r, dlk_error *err)
{
    /* a dataset on S3 or GCS: its store's settings as Dataset() reads
     * them (the library reads no environment) */
    store_env env = {.opts = DLK_STORE_OPTIONS_INIT};
    dlk_status rc = store_env_needed(a->url)
                        ? store_env_load(&env, false, err)
                        : DLK_OK;
    o->store = &env.opts;
    if (!rc) {
        Py_BEGIN_ALLOW_THREADS
        rc = a->create ? dlk_ingest_create(a->url, NULL, 0, 0, o, r, err)
                       : dlk_ingest(a->url, o, r, err);
        Py_END_ALLOW_THREADS
    }
    store_env_free(&env);
    return rc;
}

static PyObject *ingest_objects(PyObject *m, PyObject *args)
{
    (void)m;
    struct ingest_args a;
    if (ingest_args_parse(args, &a) < 0)
        return NULL;
    PyObject *items = PySequence_Tuple(a.seq); /* held: its buffers stay */
    if (!items)
        return NULL;
    Py_ssize_t n = PyTuple_Size(items);
    dlk_ingest_object *objs = calloc(n ? (size_t)n : 1, sizeof *objs);
    Py_buffer *views = calloc(n ? (size_t)n : 1, sizeof *views);
    Py_ssize_t held = 0;
    PyObject *out = NULL;
    ingest_cb cb = {PyList_New(0), PyList_New(0), PyList_New(0),
                    PyList_New(0), PyList_New(0), 0, 0};
    if (!objs || !views) {
        PyErr_NoMemory();
        goto done;
    }
    if (!cb.errors || !cb.unused || !cb.schema || !cb.classes || !cb.changed)
        goto done;
    if (wrap_objects(items, a.reader != NULL, objs, views, &held) < 0)
        goto done;
    dlk_ingest_opts o = DLK_INGEST_OPTS_INIT;
    ingest_opts(&a, objs, (size_t)n, &cb, &o);
    dlk_ingest_result r = DLK_INGEST_RESULT_INIT;
    dlk_error err;
    dlk_status rc = run_ingest(&a, &o, &r, &err);
    if (cb.failed) /* the callback's exception (KeyboardInterrupt) */
        goto done;
    out = ingest_result(&r, &cb, a.dry_run);
    if (out && rc) {
        /* a rejected run (max_skip), or a failed one: its errors with it */
        raise_dlk_result(&err, out);
        Py_CLEAR(out);
    }
done:
    for (Py_ssize_t i = 0; i < held; i++)
        if (views[i].obj)
            PyBuffer_Release(&views[i]);
    free(views);
    free(objs);
    Py_DECREF(items);
    Py_XDECREF(cb.errors);
    Py_XDECREF(cb.unused);
    Py_XDECREF(cb.schema);
    Py_XDECREF(cb.classes);
    Py_XDECREF(cb.changed);
    return out;
}

static PyMethodDef module_methods[] = {
    {"launch_env", launch_env, METH_VARARGS,
     "(rank, world_size, local_rank, local_world_size) from torchrun, MPI "
     "or Slurm"},
    {"cuda_available", cuda_available, METH_NOARGS, "(bool, why not)"},
    {"local_gpu", local_gpu, METH_NOARGS,
     "the GPU this process takes by default, or None"},
    {"version", version, METH_NOARGS, "the library's version"},
    {"_ingest", ingest_objects, METH_VARARGS,
     "ingest objects (key, version, bytes) read from a table: "
     "dlk.ingest_parquet"},
    {"_at_exit", at_exit, METH_NOARGS,
     "leave open loaders to the process's end (atexit)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dlk._core", "libdlk binding", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

/* A type made from its spec, of module m; 0, else -1 with the exception
 * set. */
static int make_type(PyObject *m, PyType_Spec *spec, PyTypeObject **type)
{
    *type = (PyTypeObject *)PyType_FromModuleAndSpec(m, spec, NULL);
    return *type ? 0 : -1;
}

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (make_type(m, &Dataset_spec, &DatasetType) ||
        make_type(m, &Loader_spec, &LoaderType) ||
        make_type(m, &Kept_spec, &KeptType) ||
        make_type(m, &Tensor_spec, &TensorType) ||
        make_type(m, &Index_spec, &IndexType)) {
        Py_DECREF(m);
        return NULL;
    }
    DlkError = PyErr_NewExceptionWithDoc(
        "dlk.Error", "An error from libdlk: str() is its message; .code the "
        "dlk_status number, .reason its name, .exit_code the code `dlk` "
        "exits with for it (3 failed, 4 a concurrent writer)", PyExc_Exception, NULL);
    if (!DlkError || PyModule_AddObjectRef(m, "Error", DlkError) < 0 ||
        PyModule_AddObjectRef(m, "Dataset", (PyObject *)DatasetType) < 0 ||
        PyModule_AddObjectRef(m, "Loader", (PyObject *)LoaderType) < 0 ||
        PyModule_AddObjectRef(m, "Tensor", (PyObject *)TensorType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
