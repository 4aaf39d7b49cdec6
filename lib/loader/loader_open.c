/* loader_open.c - opening and closing a loader: tensors, blocks, device,
 * memory budget, I/O threads; and the state as JSON. */
#include "loader_int.h"
#include "pins.h"
#include "util/abi.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

dlk_status Dlk_dev_open(const char *name, const Dlk_dev_opts *o,
                        Dlk_dev **out, dlk_error *err)
{
    if (!name || !*name || strcmp(name, "cpu") == 0)
        return Dlk_dev_open_cpu(out, err);
    if (strcmp(name, "auto") == 0) {
        if (Dlk_dev_open_cuda(0, o, out, NULL) == DLK_OK)
            return DLK_OK;
        return Dlk_dev_open_cpu(out, err);
    }
    if (strncmp(name, "cuda", 4) == 0) {
        int idx = 0;
        if (name[4] == ':') {
            char *end;
            long v = strtol(name + 5, &end, 10);
            if (*end || v < 0 || v > 1024)
                return Dlk_fail(err, DLK_EINVAL, "bad device '%s' (cpu, "
                                "cuda:N or auto)", name);
            idx = (int)v;
        } else if (name[4]) {
            return Dlk_fail(err, DLK_EINVAL, "bad device '%s' (cpu, cuda:N "
                            "or auto)", name);
        }
        return Dlk_dev_open_cuda(idx, o, out, err);
    }
    return Dlk_fail(err, DLK_EINVAL, "bad device '%s' (cpu, cuda:N or auto)",
                    name);
}

static dlk_status pick_tensors(dlk_loader *l, dlk_error *err)
{
    const Dlk_manifest *m = &l->ds->m;
    size_t n = l->o.tensors ? l->o.ntensors : m->ntensors;
    if (n == 0)
        return Dlk_fail(err, DLK_EINVAL, "no tensors to load");
    l->t = calloc(n, sizeof *l->t);
    l->bt_out = calloc(n, sizeof *l->bt_out);
    if (!l->t || !l->bt_out)
        return Dlk_oom(err);
    for (size_t i = 0; i < n; i++) {
        int idx = l->o.tensors ? dlk_dataset_find(l->ds, l->o.tensors[i])
                               : (int)i;
        if (idx < 0) {
            char names[512] = "";
            size_t len = 0;
            for (size_t t = 0; t < m->ntensors && len < sizeof names; t++)
                len += (size_t)snprintf(names + len, sizeof names - len,
                                        "%s%s", t ? ", " : "",
                                        m->tensors[t].spec.name);
            return Dlk_fail(err, DLK_ENOTFOUND, "no tensor '%s' in '%s' (its "
                            "tensors: %s)", l->o.tensors[i], l->ds->url,
                            m->ntensors ? names : "none");
        }
        Dlk_loader_tensor *lt = &l->t[i];
        l->nt = i + 1; /* its arrays are close's to free from here on */
        lt->tensor = &m->tensors[idx];
        lt->index = (size_t)idx;
        const dlk_tensor_spec *s = &lt->tensor->spec;
        lt->out.name = s->name;
        lt->out.dtype = s->dtype;
        lt->out.ndim = s->ndim;
        for (int d = 0; d < s->ndim; d++) {
            lt->out.shape[d] = s->shape[d];
            lt->variable |= s->shape[d] == DLK_DIM_VARIABLE;
        }
        if (lt->variable) {
            lt->offsets = calloc((size_t)l->cap + 1,
                                 sizeof *lt->offsets);
            lt->shapes = calloc((size_t)l->cap * (s->ndim ? s->ndim : 1),
                                sizeof *lt->shapes);
            if (!lt->offsets || !lt->shapes)
                return Dlk_oom(err);
            lt->out.offsets = lt->offsets;
            lt->out.shapes = lt->shapes;
        }
    }
    /* every tensor must have the same samples: a batch is a set of rows */
    for (size_t i = 1; i < n; i++)
        if (l->t[i].tensor->samples != l->t[0].tensor->samples)
            return Dlk_fail(err, DLK_EINVAL, "tensors '%s' and '%s' hold "
                            "%llu and %llu samples; a loader needs equal "
                            "rows", l->t[0].out.name, l->t[i].out.name,
                            (unsigned long long)l->t[0].tensor->samples,
                            (unsigned long long)l->t[i].tensor->samples);
    return DLK_OK;
}

/* opts.augment: parse it, find its tensor (named, or the first image or
 * video one), and give the batch tensor the output's dtype and shape. */
static dlk_status pick_augment(dlk_loader *l, dlk_error *err)
{
    l->aug_t = -1;
    if (!l->o.augment)
        return DLK_OK;
    dlk_status rc = Dlk_aug_parse(l->o.augment, &l->aug, err);
    if (rc)
        return rc;
    if (l->o.check)
        return Dlk_fail(err, DLK_EINVAL, "augment: not with check (check "
                        "folds the stored bytes a batch holds)");
    for (size_t t = 0; t < l->nt && l->aug_t < 0; t++) {
        const dlk_tensor_spec *s = &l->t[t].tensor->spec;
        if (l->o.augment_tensor ? !strcmp(s->name, l->o.augment_tensor)
                                : s->kind == DLK_KIND_IMAGE ||
                                      s->kind == DLK_KIND_VIDEO)
            l->aug_t = (long)t;
    }
    if (l->aug_t < 0)
        return l->o.augment_tensor
                   ? Dlk_fail(err, DLK_ENOTFOUND, "augment_tensor: no "
                              "tensor '%s' loaded", l->o.augment_tensor)
                   : Dlk_fail(err, DLK_EINVAL, "augment: no tensor of kind "
                              "image or video loaded");
    Dlk_loader_tensor *lt = &l->t[l->aug_t];
    const dlk_tensor_spec *s = &lt->tensor->spec;
    int64_t c = s->ndim >= 3 ? s->shape[s->ndim - 1] : 0;
    if (s->dtype != DLK_U8 || (s->ndim != 3 && s->ndim != 4) ||
        (c != 1 && c != 3))
        return Dlk_fail(err, DLK_EINVAL, "augment: tensor '%s' is not "
                        "H x W x C (or T x H x W x C) uint8 with C 1 or 3",
                        s->name);
    if (s->ndim == 4 && s->shape[0] == DLK_DIM_VARIABLE)
        return Dlk_fail(err, DLK_EINVAL, "augment: tensor '%s' has a "
                        "variable frame count (a batch of clips needs "
                        "one)", s->name);
    l->aug_shapes = calloc((size_t)l->cap * 4, sizeof(int64_t));
    if (!l->aug_shapes)
        return Dlk_oom(err);
    static const dlk_dtype out_dt[] = {DLK_U8, DLK_F16, DLK_BF16,
                                       DLK_F32};
    int64_t oh = l->aug.out_h, ow = l->aug.out_w;
    int d = 0;
    if (s->ndim == 4)
        lt->out.shape[d++] = s->shape[0];
    if (l->aug.layout == DLK_AUG_NCHW) {
        lt->out.shape[d++] = c;
        lt->out.shape[d++] = oh;
        lt->out.shape[d++] = ow;
    } else {
        lt->out.shape[d++] = oh;
        lt->out.shape[d++] = ow;
        lt->out.shape[d++] = c;
    }
    lt->out.ndim = d;
    lt->out.dtype = out_dt[l->aug.dtype];
    lt->out.offsets = NULL;
    lt->out.shapes = NULL;
    return DLK_OK;
}

/* Parts a span holds: 4 MiB of the default 1 MiB parts, from any store
 * (so an epoch's order does not depend on where the dataset is).  Fewer,
 * larger spans mix a window less (8 MiB spans left 16 to a window of 8
 * chunks, too few strata for 10 classes), and smaller ones pay a read
 * and a device copy each for little data; from a remote store a span is
 * one ranged GET, and 4 MiB requests, 256 in flight, keep the rate of
 * whole chunks.  docs/benchmarks.md#label-mix. */
#define SPAN_PARTS 4u

/* Which tensors are read in spans, and how many units each chunk has. */
static dlk_status pick_units(dlk_loader *l, dlk_error *err)
{
    for (size_t i = 0; i < l->nt; i++) {
        Dlk_loader_tensor *lt = &l->t[i];
        const Dlk_tensor *t = lt->tensor;
        uint32_t pb = t->spec.part_bytes;
        if (!pb || t->spec.codec != DLK_CODEC_NONE || l->o.whole_chunks)
            continue;
        lt->unit_parts = l->o.span_parts ? l->o.span_parts : SPAN_PARTS;
        l->spans = true;
        if (!(lt->unit_base = malloc((t->nchunks + 1) *
                                     sizeof *lt->unit_base)))
            return Dlk_oom(err);
        lt->unit_base[0] = 0;
        for (size_t c = 0; c < t->nchunks; c++) {
            uint32_t n = Dlk_span_nparts(lt, c);
            lt->unit_base[c + 1] = lt->unit_base[c] +
                                   (n + lt->unit_parts - 1) / lt->unit_parts;
        }
    }
    return DLK_OK;
}

/* Blocks are the units of the tensor with the most bytes (its chunks, or
 * its chunks' spans): what is read as one and dealt to ranks.  The
 * shuffle window holds window_chunks chunks' worth of them. */
static dlk_status pick_blocks(dlk_loader *l, dlk_error *err)
{
    size_t main = 0;
    for (size_t i = 1; i < l->nt; i++)
        if (l->t[i].tensor->raw_bytes > l->t[main].tensor->raw_bytes)
            main = i;
    const Dlk_loader_tensor *lt = &l->t[main];
    const Dlk_tensor *t = lt->tensor;
    size_t n = lt->unit_parts ? (size_t)lt->unit_base[t->nchunks]
                              : t->nchunks;
    l->nblocks = n;
    l->block_first = malloc((n ? n : 1) * sizeof *l->block_first);
    l->block_count = malloc((n ? n : 1) * sizeof *l->block_count);
    if (!l->block_first || !l->block_count)
        return Dlk_oom(err);
    size_t b = 0;
    for (size_t c = 0; c < t->nchunks; c++) {
        const Dlk_chunk_entry *e = &t->chunks[c];
        if (!lt->unit_parts) {
            l->block_first[b] = e->first;
            l->block_count[b++] = e->samples;
            continue;
        }
        uint32_t np = Dlk_span_nparts(lt, c), g = lt->unit_parts;
        for (uint32_t p = 0; p < np; p += g) {
            uint32_t a = Dlk_part_first(p, e->samples, np);
            uint32_t z = Dlk_part_first(p + g < np ? p + g : np, e->samples,
                                        np);
            l->block_first[b] = e->first + a;
            l->block_count[b++] = z - a;
        }
    }
    l->avg_block = n ? t->samples / n : 1;
    if (!l->avg_block)
        l->avg_block = 1;
    l->chunk_blocks = t->nchunks ? (n + t->nchunks - 1) / t->nchunks : 1;
    l->span_bytes = (uint64_t)lt->unit_parts * t->spec.part_bytes;
    l->window_blocks = (uint64_t)l->o.window_chunks * l->chunk_blocks;
    return DLK_OK;
}

/* Bytes a remote store's reads keep in flight by default: what a rate of
 * ~10 GB/s needs at ~100 ms to the first byte (rate x latency). */
#define REMOTE_INFLIGHT_BYTES (1ull << 30)
/* I/O threads for a remote store by default, at least: each waits on one
 * chunk's GETs, so they bound the chunks in flight. */
#define REMOTE_IO_THREADS 64
/* ... and at most, when reading spans of parts: 192 spans of 4 MiB keep
 * 768 MiB in flight.  From S3 at 50 ms to the first byte (16-core H200
 * host, one process) 192 such threads read 12.5-14.1 GB/s where 128 read
 * 10.1-10.6 and 256 11.7; when ranks share the host 128 each kept two
 * H200 busier over a run's first epoch (95.7-96.5% against 94.2-96.3%
 * at a 13 ms step): more loads ahead share the store with the ones a
 * batch waits for (docs/benchmarks.md#label-mix). */
#define REMOTE_SPAN_THREADS 192
#define REMOTE_SPAN_THREADS_SHARED 128

/* Bytes one chunk of every loaded tensor takes, at the largest. */
static uint64_t chunk_set_bytes(const dlk_loader *l)
{
    uint64_t per_set = 0;
    for (size_t i = 0; i < l->nt; i++) {
        uint64_t mx = 0;
        const Dlk_tensor *t = l->t[i].tensor;
        for (size_t c = 0; c < t->nchunks; c++)
            if (Dlk_chunk_cost(t, c) > mx)
                mx = Dlk_chunk_cost(t, c);
        per_set += mx;
    }
    return per_set;
}

/* Bytes of every chunk the loader may read, as loads hold them. */
static uint64_t data_bytes(const dlk_loader *l)
{
    uint64_t all = 0;
    for (size_t i = 0; i < l->nt; i++) {
        const Dlk_tensor *t = l->t[i].tensor;
        for (size_t c = 0; c < t->nchunks; c++)
            all += Dlk_chunk_cost(t, c);
    }
    return all;
}

/* The budget: the shuffle window plus the read-ahead, in chunks of the
 * largest size, for every tensor; never below what one batch needs. */
static uint64_t derive_limit(const dlk_loader *l)
{
    return chunk_set_bytes(l) * (l->o.window_chunks + l->o.prefetch_chunks);
}

/* Defaults that depend on the store: from a remote one, the read-ahead
 * and the threads cover REMOTE_INFLIGHT_BYTES, as a store's latency,
 * not its bandwidth, bounds what few requests in flight can read. */
/* The window and read-ahead not given, before the blocks are cut. */
static void window_defaults(dlk_loader *l, const dlk_loader_opts *given)
{
    if (!given->window_chunks)
        l->o.window_chunks = 8;
    if (!given->prefetch_chunks)
        l->o.prefetch_chunks = 2 * l->o.window_chunks;
}

static void store_defaults(dlk_loader *l, const dlk_loader_opts *given)
{
    bool remote = Dlk_store_is_remote(l->ds->store);
    uint64_t set = chunk_set_bytes(l);
    if (!given->prefetch_chunks && remote && set) {
        uint64_t want = (REMOTE_INFLIGHT_BYTES + set - 1) / set;
        if (want > 256)
            want = 256;
        if (want > l->o.prefetch_chunks)
            l->o.prefetch_chunks = (uint32_t)want;
    }
    if (!given->io_threads && remote) {
        /* one load a chunk or span in flight: as many as cover
         * REMOTE_INFLIGHT_BYTES, spans up to REMOTE_SPAN_THREADS (or
         * REMOTE_SPAN_THREADS_SHARED a rank when ranks share the host) */
        uint32_t n = l->o.prefetch_chunks < REMOTE_IO_THREADS
                         ? l->o.prefetch_chunks : REMOTE_IO_THREADS;
        if (l->spans && l->span_bytes) {
            uint64_t k = REMOTE_INFLIGHT_BYTES / l->span_bytes;
            uint32_t most = l->o.local_world_size > 1
                                ? REMOTE_SPAN_THREADS_SHARED
                                : REMOTE_SPAN_THREADS;
            n = k > most ? most : k < n ? n : (uint32_t)k;
        }
        if (n > l->o.io_threads)
            l->o.io_threads = n;
    }
}

/* The memory limit of the cgroup this process is in (v2, or v1's memory
 * controller), the lowest along its ancestors; 0 when there is none. */
static uint64_t cgroup_limit_at(const char *root, const char *path,
                                const char *file)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s%s", root, path);
    uint64_t best = 0;
    for (;;) {
        char f[600];
        snprintf(f, sizeof f, "%s/%s", dir, file);
        FILE *fp = fopen(f, "r");
        if (fp) {
            unsigned long long v;
            if (fscanf(fp, "%llu", &v) == 1 && v > 0 &&
                v < ((unsigned long long)1 << 60) && (!best || v < best))
                best = v; /* "max" (v2) or a huge number (v1): no limit */
            fclose(fp);
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < strlen(root))
            break;
        *slash = '\0';
    }
    return best;
}

static uint64_t cgroup_memory_limit(void)
{
    FILE *fp = fopen("/proc/self/cgroup", "r");
    char line[1024];
    uint64_t best = 0;
    while (fp && fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (strcmp(path, "/") == 0)
            path = "";
        uint64_t v = 0;
        if (!*ctrls) { /* v2: the unified hierarchy */
            v = cgroup_limit_at("/sys/fs/cgroup", path, "memory.max");
            if (!v)
                v = cgroup_limit_at("/sys/fs/cgroup/unified", path,
                                    "memory.max");
        } else {
            char list[256];
            snprintf(list, sizeof list, ",%s,", ctrls);
            if (strstr(list, ",memory,"))
                v = cgroup_limit_at("/sys/fs/cgroup/memory", path,
                                    "memory.limit_in_bytes");
        }
        if (v && (!best || v < best))
            best = v;
    }
    if (fp)
        fclose(fp);
    return best;
}

/* Memory the loader may plan with: the machine's, or the cgroup's limit
 * when that is lower (the job is killed past it, and pinned pages cannot
 * be reclaimed, so they count against it). */
static uint64_t usable_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz
                                        : (uint64_t)8 << 30;
    uint64_t cg = cgroup_memory_limit();
    return cg && cg < mem ? cg : mem;
}

static dlk_status loader_open(dlk_dataset *ds, const dlk_loader_opts *opts,
                              Dlk_dev *dev, uint32_t cap, dlk_loader **out,
                              dlk_error *err);

void Dlk_loader_init_sync(dlk_loader *l)
{
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->ready, NULL);
    pthread_cond_init(&l->idle, NULL);
    pthread_cond_init(&l->upq, NULL);
    pthread_cond_init(&l->mapped, NULL);
}

/* One loader of its own (not a mix's source): its own device */
static dlk_status loader_open_own(dlk_dataset *ds, const dlk_loader_opts *o,
                                  dlk_loader **out, dlk_error *err)
{
    return loader_open(ds, o, NULL, 0, out, err);
}

ABI_OPEN_WRAPPER(dlk_loader_open, loader_open_own, dlk_loader_opts, dlk_loader)

dlk_status Dlk_loader_open_source(dlk_dataset *ds, const dlk_loader_opts *o,
                                  Dlk_dev *dev, uint32_t cap,
                                  dlk_loader **out, dlk_error *err)
{
    *out = NULL;
    return loader_open(ds, o, dev, cap, out, err);
}

/* The options the loader keeps, with the defaults of those not given. */
static void take_opts(dlk_loader *l, dlk_dataset *ds,
                      const dlk_loader_opts *opts, uint32_t cap)
{
    l->ds = ds;
    l->store = ds->store;
    l->o = *opts;
    l->o.start = NULL; /* read at open only: the caller's to free after */
    l->o.cache_dir = NULL; /* the same */
    if (!l->o.batch_size)
        l->o.batch_size = 256;
    l->cap = cap > l->o.batch_size ? cap : l->o.batch_size;
    if (!l->o.world_size)
        l->o.world_size = 1;
    if (!l->o.local_world_size)
        l->o.local_world_size = 1;
    if (!l->o.io_threads) {
        /* ranks on one host share its cores */
        int n = dlk_cpu_count() / (int)l->o.local_world_size;
        n = n < 1 ? 1 : n;
        l->o.io_threads = n > 32 ? 32 : (uint32_t)n;
    }
}

/* opts.cache_dir: the store the loader reads through, in front of a
 * remote one. */
static dlk_status open_cache(dlk_loader *l, const dlk_loader_opts *opts,
                             dlk_error *err)
{
    /* a local dataset is read in place: a cache would be a second copy */
    if (!opts->cache_dir || !*opts->cache_dir ||
        !Dlk_store_is_remote(l->ds->store))
        return DLK_OK;
    dlk_status rc = Dlk_store_open_cache(l->ds->store, opts->cache_dir,
                                         opts->cache_limit, !opts->no_verify,
                                         &l->cache, err);
    if (!rc)
        l->store = l->cache;
    return rc;
}

/* What the loader reads: its tensors, their units and blocks, the rows
 * of a view and the parts they need. */
static dlk_status pick_data(dlk_loader *l, const dlk_loader_opts *opts,
                            dlk_error *err)
{
    dlk_status rc = pick_tensors(l, err);
    if (!rc)
        rc = pick_augment(l, err);
    if (!rc)
        rc = pick_units(l, err);
    if (!rc) {
        window_defaults(l, opts);
        rc = pick_blocks(l, err);
    }
    if (!rc && (l->o.view || l->o.rows))
        rc = Dlk_loader_pick_rows(l, err);
    if (!rc)
        rc = Dlk_loader_mark_parts(l, err);
    return rc;
}

/* The memory budget of chunk buffers; returns this rank's share of the
 * usable memory, which the budget stays within. */
static uint64_t plan_memory(dlk_loader *l, const dlk_loader_opts *opts)
{
    store_defaults(l, opts);
    l->limit = l->o.memory_limit ? l->o.memory_limit : derive_limit(l);
    /* chunk buffers get at most half of the usable memory (the rest:
     * batches, the process, the page cache the GPU path pins), and
     * ranks on one host share that half: each would otherwise take
     * it whole, and eight ranks in one container four times over */
    uint64_t share = usable_memory() / 2 / l->o.local_world_size;
    if (l->limit > share)
        l->limit = share;
    l->folds_max = l->limit / 16 < FOLDS_KEPT_MAX ? l->limit / 16
                                                  : FOLDS_KEPT_MAX;
    return share;
}

/* The device: a mix's (dev, shared), or one of the loader's own. */
static dlk_status open_device(dlk_loader *l, Dlk_dev *dev, dlk_error *err)
{
    /* a GPU's host buffers for the budget are made from the open on,
     * while CUDA starts, unless chunks are read in place (pin_cache)
     * or the data is smaller */
    Dlk_dev_opts dopts = {l->o.cuda_trace, 0, true, false};
    /* spans' parts are checked on the device after their copies */
    for (size_t i = 0; i < l->nt && !l->o.no_verify &&
                       l->o.on_bad != DLK_ON_BAD_SKIP; i++)
        if (l->t[i].unit_parts)
            dopts.checks = true;
    if (!l->o.pin_cache || l->o.no_map ||
        Dlk_store_is_remote(l->ds->store)) {
        uint64_t all = data_bytes(l);
        dopts.host_ahead = all < l->limit ? all : l->limit;
    }
    l->host_ahead = dopts.host_ahead;
    if (dev) {
        l->dev = dev;
        l->dev_shared = true;
        return DLK_OK;
    }
    return Dlk_dev_open(l->o.device, &dopts, &l->dev, err);
}

/* The arrays a batch is gathered in. */
static dlk_status alloc_batch(dlk_loader *l, dlk_error *err)
{
    if (!(l->gather = malloc(l->nt * l->cap * sizeof *l->gather)) ||
        !(l->bslot = malloc(l->nt * l->cap * sizeof *l->bslot)) ||
        !(l->btotal = malloc(l->nt * sizeof *l->btotal)) ||
        !(l->bidx = malloc(l->cap * sizeof *l->bidx)) ||
        !(l->bpad = malloc(l->cap)) || !(l->bbad = malloc(l->cap)))
        return Dlk_oom(err);
    return DLK_OK;
}

/* The batch's tensors, the device's budget, the state at the start and
 * the threads' ramp. */
static void init_batch(dlk_loader *l)
{
    Dlk_bad_defaults(l);
    for (size_t i = 0; i < l->nt; i++)
        l->bt_out[i] = l->t[i].out;
    l->batch.ntensors = l->nt;
    l->batch.tensors = l->bt_out;
    l->batch.on_device = l->dev->ops->on_device;
    /* device memory: the budget, and a batch's worth more so that a
     * batch that needs chunks beyond the budget still gets them */
    if (!l->dev_shared) /* a mix's: it sets its sources' sum */
        l->dev->ops->set_budget(l->dev, l->limit + l->limit / 4);
    l->st.seed = l->o.seed;
    l->st.epoch = 0;
    l->st.nseg = 1;
    l->st.seg[0].world = l->o.world_size;
    l->st.seg[0].batch = l->o.batch_size;
    l->nthreads = l->o.io_threads;
    /* RAMP_START chunks' worth: a span is a part of its chunk */
    uint64_t ramp = RAMP_START * (l->chunk_blocks ? l->chunk_blocks : 1);
    l->ramp = ramp < l->nthreads ? (uint32_t)ramp : l->nthreads;
}

/* How many chunks are mapped in place, given `share` (this rank's share
 * of the usable memory); and the chunks' records. */
static dlk_status init_maps(dlk_loader *l, uint64_t share, dlk_error *err)
{
    dlk_status rc = DLK_OK;
    /* map chunks in place where the store can.  On a GPU that pins
     * them for the loader's life, so only as many as pin_cache asks,
     * and with the buffers within this rank's share of half of the
     * usable memory.  Ranks pin the same page cache where their
     * chunks meet, so together they pin at most that half */
    uint64_t room = share > l->limit ? share - l->limit : 0;
    l->map_limit = !l->dev->ops->on_device ? UINT64_MAX
                   : l->o.pin_cache < room ? l->o.pin_cache
                                           : room;
    l->use_maps = l->ds->store->ops->map && !l->o.no_map &&
                  l->map_limit > 0;
    l->maps = calloc(l->nt, sizeof *l->maps);
    for (size_t i = 0; l->maps && i < l->nt; i++)
        if (!(l->maps[i] = calloc(l->t[i].tensor->nchunks + 1,
                                  sizeof *l->maps[i])))
            rc = Dlk_oom(err);
    if (!l->maps)
        rc = Dlk_oom(err);
    return rc;
}

static dlk_status loader_open(dlk_dataset *ds, const dlk_loader_opts *opts,
                              Dlk_dev *dev, uint32_t cap, dlk_loader **out,
                              dlk_error *err)
{
    dlk_loader *l = calloc(1, sizeof *l);
    if (!l)
        return Dlk_oom(err);
    take_opts(l, ds, opts, cap);
    Dlk_loader_init_sync(l);
    dlk_status rc = open_cache(l, opts, err);
    uint64_t share = 0;
    if (!rc && l->o.rank >= l->o.world_size)
        rc = Dlk_fail(err, DLK_EINVAL, "rank %u is not below world size %u",
                      l->o.rank, l->o.world_size);
    if (!rc && (l->o.batch_size > (1u << 24) || l->o.io_threads > 256 ||
                l->o.window_chunks > 65536 || l->o.span_parts > 65536))
        rc = Dlk_fail(err, DLK_EINVAL, "batch size, threads or window out "
                      "of range");
    else if (!rc && l->o.on_bad != DLK_ON_BAD_FAIL &&
             l->o.on_bad != DLK_ON_BAD_SKIP)
        rc = Dlk_fail(err, DLK_EINVAL, "on_bad %d is neither fail (0) nor "
                      "skip (1)", l->o.on_bad);
    if (!rc)
        rc = pick_data(l, opts, err);
    if (!rc) {
        share = plan_memory(l, opts);
        rc = open_device(l, dev, err);
    }
    if (!rc && l->aug_t >= 0 && !l->dev->ops->augment)
        rc = Dlk_fail(err, DLK_EUNSUPPORTED, "augment: not available on "
                      "device '%s'", l->o.device ? l->o.device : "cpu");
    if (!rc && !opts->io_threads && l->dev->ops->on_device &&
        !Dlk_store_is_remote(l->ds->store) && l->o.io_threads >= 4)
        /* from local files every loading thread is busy copying out of
         * the page cache; on as many threads as cores the thread that
         * queues the copies to the GPU waits for a core and the link
         * idles (16-core H200 host: 40-42 GB/s on 16 threads, 47-49 on
         * 12; docs/benchmarks.md#line-rate) */
        l->o.io_threads -= l->o.io_threads / 4;
    if (!rc)
        rc = alloc_batch(l, err);
    if (!rc) {
        init_batch(l);
        rc = init_maps(l, share, err);
    }
    if (!rc)
        rc = Dlk_loader_start_workers(l, err);
    if (!rc)
        rc = Dlk_loader_begin(l, opts->start, err);
    /* the first loads read while the device started; the loader is
     * ready when the device is */
    if (!rc)
        rc = l->dev->ops->ready(l->dev, err);
    if (rc) {
        dlk_loader_close(l);
        return rc;
    }
    *out = l;
    return DLK_OK;
}

void dlk_loader_close(dlk_loader *l)
{
    if (!l)
        return;
    if (l->mix)
        Dlk_mix_close(l); /* the sources, before the device they share */
    if (l->threads)
        Dlk_loader_stop_workers(l);
    Dlk_plan_free(l, &l->plan, true);
    Dlk_plan_free(l, &l->ahead, true);
    for (size_t i = 0; i < l->nretired; i++)
        Dlk_plan_free(l, &l->retired[i], true);
    free(l->retired);
    for (size_t t = 0; l->maps && t < l->nt; t++) {
        for (size_t c = 0; l->maps[t] && c < l->t[t].tensor->nchunks; c++) {
            free(l->maps[t][c].fold);
            Dlk_span_free_kept(l, &l->maps[t][c]);
        }
        for (size_t c = 0; l->maps[t] && c < l->t[t].tensor->nchunks; c++)
            if (l->maps[t][c].p) {
                char key[DLK_CHUNK_KEY_MAX];
                Dlk_chunk_key(key, l->t[t].tensor->spec.name,
                              l->t[t].tensor->chunks[c].key);
                Dlk_pins_put(l->ds->store, key, l->dev);
            }
        free(l->maps[t]);
    }
    free(l->maps);
    Dlk_store_free(l->cache);
    Dlk_loader_free_kept(l);
    for (size_t t = 0; t < l->nt; t++) {
        if (l->t[t].buf)
            l->dev->ops->batch_free(l->dev, l->t[t].buf);
        free(l->t[t].unit_base);
        free(l->t[t].part_base);
        free(l->t[t].need);
        free(l->t[t].offsets);
        free(l->t[t].shapes);
    }
    free(l->t);
    free(l->bt_out);
    free(l->aug_shapes);
    free(l->aug_rows);
    free(l->rows_owned);
    free(l->block_first);
    free(l->block_count);
    free(l->gather);
    free(l->bslot);
    free(l->btotal);
    free(l->bidx);
    free(l->bpad);
    free(l->bbad);
    if (l->dev && !l->dev_shared)
        l->dev->ops->close(l->dev);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work);
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->idle);
    pthread_cond_destroy(&l->upq);
    pthread_cond_destroy(&l->mapped);
    free(l);
}

char *dlk_loader_state_json(const dlk_loader_state *st)
{
    json_t *segs = json_array();
    for (uint32_t i = 0; i < st->nseg && i < DLK_LOADER_MAX_SEGMENTS; i++)
        json_array_append_new(segs, json_pack("{s:i,s:i,s:I}", "world",
                                              (int)st->seg[i].world, "batch",
                                              (int)st->seg[i].batch, "steps",
                                              (json_int_t)st->seg[i].steps));
    json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:o}", "seed_hex", "", "epoch",
                          (json_int_t)st->epoch, "samples",
                          (json_int_t)st->samples, "nseg",
                          (json_int_t)st->nseg, "segments", segs);
    char seed[32];
    snprintf(seed, sizeof seed, "%016llx", (unsigned long long)st->seed);
    json_object_set_new(o, "seed_hex", json_string(seed));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

dlk_status dlk_loader_state_parse(const char *text, dlk_loader_state *out,
                                  dlk_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *o = json_loads(text, 0, NULL);
    const char *seed = json_string_value(json_object_get(o, "seed_hex"));
    json_t *epoch = json_object_get(o, "epoch");
    json_t *segs = json_object_get(o, "segments");
    dlk_status rc = DLK_OK;
    if (!o || !seed || strlen(seed) != 16 ||
        strspn(seed, "0123456789abcdef") != 16 || !json_is_integer(epoch) ||
        json_integer_value(epoch) < 0 || !json_is_array(segs) ||
        json_array_size(segs) < 1 ||
        json_array_size(segs) > DLK_LOADER_MAX_SEGMENTS) {
        rc = Dlk_fail(err, DLK_EINVAL, "malformed loader state");
    } else {
        out->seed = strtoull(seed, NULL, 16);
        out->epoch = (uint64_t)json_integer_value(epoch);
        out->nseg = (uint32_t)json_array_size(segs);
        for (uint32_t i = 0; i < out->nseg && !rc; i++) {
            json_t *s = json_array_get(segs, i);
            json_t *w = json_object_get(s, "world"),
                   *b = json_object_get(s, "batch"),
                   *n = json_object_get(s, "steps");
            if (!json_is_integer(w) || !json_is_integer(b) ||
                !json_is_integer(n) || json_integer_value(w) < 1 ||
                json_integer_value(w) > 1 << 20 || json_integer_value(b) < 1 ||
                json_integer_value(b) > 1 << 24 || json_integer_value(n) < 0)
                rc = Dlk_fail(err, DLK_EINVAL, "malformed loader state "
                              "segment %u", i);
            else {
                out->seg[i].world = (uint32_t)json_integer_value(w);
                out->seg[i].batch = (uint32_t)json_integer_value(b);
                out->seg[i].steps = (uint64_t)json_integer_value(n);
            }
        }
    }
    json_decref(o);
    return rc;
}
