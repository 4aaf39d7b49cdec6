/* commit.c - immutable commits, the main reference, and the log.
 *
 * A commit is commits/<id>.json: the head manifest at that moment plus
 * parent, time, message and stats; its id is the XXH3-128 of those exact
 * bytes, so a reader can check that a commit is what its name says.  The
 * only mutable object is refs/heads/main, always replaced conditionally
 * (create-only the first time, If-Match on the etag read after that). */
#include "dataset.h"
#include "format/docs.h"
#include "format/json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define COMMIT_ROUNDS 8
#define REF_MAX 256

static bool is_hex_id(const char *s, size_t min, size_t max)
{
    size_t n = strspn(s, "0123456789abcdef");
    return s[n] == '\0' && n >= min && n <= max;
}

void Dlk_ref_get_req(Dlk_get_req *r, Dlk_buf *b, Dlk_obj_info *info)
{
    memset(r, 0, sizeof *r);
    r->key = DLK_KEY_MAIN;
    r->max = REF_MAX;
    r->out = b;
    r->info = info;
}

dlk_status Dlk_ref_parse(const Dlk_get_req *r, char id[DLK_ID_MAX],
                         char *etag, bool *exists, dlk_error *err)
{
    *exists = false;
    if (r->rc == DLK_ENOTFOUND) {
        Dlk_error_clear(err);
        return DLK_OK;
    }
    if (r->rc)
        return Dlk_get_req_status(r, err);
    const Dlk_buf *b = r->out;
    size_t n = b->len;
    while (n && (b->data[n - 1] == '\n' || b->data[n - 1] == '\r'))
        n--;
    if (n != 32 || memchr(b->data, 0, n))
        return Dlk_fail(err, DLK_ECORRUPT, "%s: not a commit id",
                        DLK_KEY_MAIN);
    memcpy(id, b->data, n);
    id[n] = '\0';
    if (!is_hex_id(id, 32, 32))
        return Dlk_fail(err, DLK_ECORRUPT, "%s: not a commit id",
                        DLK_KEY_MAIN);
    if (etag)
        memcpy(etag, r->info->etag, DLK_ETAG_MAX);
    *exists = true;
    return DLK_OK;
}

dlk_status Dlk_ref_read(dlk_dataset *ds, char id[DLK_ID_MAX], char *etag,
                        bool *exists, dlk_error *err)
{
    Dlk_buf b;
    Dlk_buf_init(&b);
    Dlk_obj_info info;
    Dlk_get_req r;
    Dlk_ref_get_req(&r, &b, &info);
    Dlk_store_get_each(ds->store, &r, 1);
    dlk_status rc = Dlk_ref_parse(&r, id, etag, exists, err);
    Dlk_buf_free(&b);
    return rc;
}

static void commit_key(char *out, size_t cap, const char *id)
{
    snprintf(out, cap, DLK_KEY_COMMITS "%s.json", id);
}

dlk_status Dlk_commit_load(dlk_dataset *ds, const char *id, Dlk_manifest *m,
                           char **time_out, char **message_out,
                           uint64_t *bytes_added, uint64_t *chunks_added,
                           dlk_error *err)
{
    char key[128];
    if (!is_hex_id(id, 32, 32))
        return Dlk_fail(err, DLK_EINVAL, "'%.80s' is not a commit id", id);
    commit_key(key, sizeof key, id);
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = Dlk_store_get(ds->store, key, DLK_JSON_MAX_BYTES, &b, NULL,
                                  err);
    if (rc == DLK_ENOTFOUND)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "commit %s not found (%s)", id, key);
    if (rc) {
        Dlk_buf_free(&b);
        return rc;
    }
    char hash[33];
    Dlk_hash128_hex(b.data, b.len, hash);
    if (strcmp(hash, id) != 0) {
        Dlk_buf_free(&b);
        return Dlk_fail(err, DLK_ECORRUPT, "%s: content does not match its "
                        "id (XXH3-128 checksum mismatch)", key);
    }
    bool want = time_out || message_out || bytes_added || chunks_added;
    Dlk_commit_meta meta;
    rc = Dlk_commit_parse((const char *)b.data, b.len, key, m,
                          want ? &meta : NULL, err);
    if (!rc && want) {
        if (time_out) {
            *time_out = meta.time;
            meta.time = NULL;
        }
        if (message_out) {
            *message_out = meta.message;
            meta.message = NULL;
        }
        if (bytes_added)
            *bytes_added = meta.bytes_added;
        if (chunks_added)
            *chunks_added = meta.chunks_added;
        Dlk_commit_meta_free(&meta);
    }
    Dlk_buf_free(&b);
    return rc;
}

dlk_status Dlk_commit_follow(dlk_dataset *ds, const char *via,
                             const char *id, Dlk_manifest *m, char **time_out,
                             char **message_out, uint64_t *bytes_added,
                             uint64_t *chunks_added,
                             char fault[DLK_COMMIT_KEY_MAX], dlk_error *err)
{
    dlk_status rc = Dlk_commit_load(ds, id, m, time_out, message_out,
                                    bytes_added, chunks_added, err);
    if (!rc)
        return DLK_OK;
    bool by_main = via && strcmp(via, "main") == 0;
    if (fault) {
        if (rc != DLK_ENOTFOUND || !via || !*via)
            commit_key(fault, DLK_COMMIT_KEY_MAX, id);
        else if (by_main)
            snprintf(fault, DLK_COMMIT_KEY_MAX, "%s", DLK_KEY_MAIN);
        else
            commit_key(fault, DLK_COMMIT_KEY_MAX, via);
    }
    if (rc != DLK_ENOTFOUND || !via || !*via)
        return rc;
    if (by_main)
        return Dlk_fail(err, DLK_ECORRUPT, "%s names commit %s, which does "
                        "not exist (" DLK_KEY_COMMITS "%s.json)",
                        DLK_KEY_MAIN, id, id);
    return Dlk_fail(err, DLK_ECORRUPT, DLK_KEY_COMMITS "%s.json: 'parent' "
                    "names commit %s, which does not exist", via, id);
}

/* ---- resolving references ----------------------------------------- */

struct prefix_match {
    char id[DLK_ID_MAX];
    int n;
};

static int on_commit_key(void *ud, const char *key, uint64_t size)
{
    (void)size;
    struct prefix_match *pm = ud;
    const char *base = key + strlen(DLK_KEY_COMMITS);
    size_t n = strlen(base);
    if (n == 37 && strcmp(base + 32, ".json") == 0) {
        if (pm->n++ == 0) {
            memcpy(pm->id, base, 32);
            pm->id[32] = '\0';
        }
    }
    return pm->n > 1;
}

dlk_status Dlk_resolve_via(dlk_dataset *ds, const char *ref,
                           char id_out[DLK_ID_MAX], char via[DLK_ID_MAX],
                           dlk_error *err)
{
    *via = '\0';
    if (!ref || !*ref || strlen(ref) > 80)
        return Dlk_fail(err, DLK_EINVAL, "empty or overlong reference");
    if (strncmp(ref, "main", 4) == 0 && (ref[4] == '\0' || ref[4] == '~')) {
        unsigned long back = 0;
        if (ref[4] == '~') {
            char *end;
            back = strtoul(ref + 5, &end, 10);
            if (end == ref + 5 || *end || back > 1000000)
                return Dlk_fail(err, DLK_EINVAL, "bad reference '%s' (main, "
                                "main~N, or a commit id)", ref);
        }
        bool exists;
        dlk_status rc = Dlk_ref_read(ds, id_out, NULL, &exists, err);
        if (rc)
            return rc;
        if (!exists)
            return Dlk_fail(err, DLK_ENOTFOUND, "'%s' has no commits yet",
                            ds->url);
        strcpy(via, "main");
        for (unsigned long i = 0; i < back; i++) {
            Dlk_manifest m;
            if ((rc = Dlk_commit_follow(ds, via, id_out, &m, NULL, NULL,
                                        NULL, NULL, NULL, err)))
                return rc;
            strcpy(via, id_out);
            if (!m.parent) {
                Dlk_manifest_free(&m);
                return Dlk_fail(err, DLK_ENOTFOUND, "'%s': main has only %lu "
                                "commit%s before it", ref, i,
                                i == 1 ? "" : "s");
            }
            snprintf(id_out, DLK_ID_MAX, "%s", m.parent);
            Dlk_manifest_free(&m);
        }
        return DLK_OK;
    }
    if (!is_hex_id(ref, 4, 32))
        return Dlk_fail(err, DLK_EINVAL, "bad reference '%s' (main, main~N, "
                        "or a commit id or unique prefix of 4+ hex digits)",
                        ref);
    if (strlen(ref) == 32) {
        strcpy(id_out, ref);
        return DLK_OK;
    }
    char prefix[128];
    snprintf(prefix, sizeof prefix, DLK_KEY_COMMITS "%s", ref);
    struct prefix_match pm = {{0}, 0};
    dlk_status rc = Dlk_store_list(ds->store, prefix, on_commit_key, &pm, err);
    if (rc)
        return rc;
    if (pm.n == 0)
        return Dlk_fail(err, DLK_ENOTFOUND, "no commit '%s' in '%s'", ref,
                        ds->url);
    if (pm.n > 1)
        return Dlk_fail(err, DLK_EINVAL, "commit prefix '%s' is ambiguous",
                        ref);
    strcpy(id_out, pm.id);
    return DLK_OK;
}

dlk_status dlk_resolve(dlk_dataset *ds, const char *ref,
                       char id_out[DLK_ID_MAX], dlk_error *err)
{
    char via[DLK_ID_MAX];
    return Dlk_resolve_via(ds, ref, id_out, via, err);
}

/* ---- committing ---------------------------------------------------- */

/* Tensors (schemas and chunk lists) of a and b are the same. */
static bool same_content(const Dlk_manifest *a, const Dlk_manifest *b)
{
    if (a->ntensors != b->ntensors)
        return false;
    Dlk_manifest ca = *a, cb = *b;
    ca.parent = cb.parent = NULL;
    ca.nwrites = cb.nwrites = 0;
    char *ta = NULL, *tb = NULL;
    size_t la, lb;
    bool same = !Dlk_manifest_dump(&ca, &ta, &la, NULL) &&
                !Dlk_manifest_dump(&cb, &tb, &lb, NULL) && la == lb &&
                memcmp(ta, tb, la) == 0;
    free(ta);
    free(tb);
    return same;
}

/* After main's update was refused: whether commit id is main, or an
 * ancestor of main newer than base (the parent it was made on; NULL: it
 * was the first), by the commits' ids alone.  Our own update may have
 * landed with its answer lost, and another commit may have landed on top
 * of it before main was read again. */
static bool in_history(dlk_dataset *ds, const char *id, const char *base)
{
    char at[DLK_ID_MAX];
    bool there;
    dlk_error e2;
    if (Dlk_ref_read(ds, at, NULL, &there, &e2) != DLK_OK || !there)
        return false;
    for (int i = 0; i < COMMIT_ROUNDS * 8; i++) {
        if (strcmp(at, id) == 0)
            return true;
        if (base && strcmp(at, base) == 0)
            return false;
        Dlk_manifest m;
        if (Dlk_commit_load(ds, at, &m, NULL, NULL, NULL, NULL, &e2))
            return false;
        bool up = m.parent && strlen(m.parent) < sizeof at;
        if (up)
            strcpy(at, m.parent);
        Dlk_manifest_free(&m);
        if (!up)
            return false;
    }
    return false;
}

static int cmp_seg(const void *a, const void *b)
{
    return strcmp(((const Dlk_seg_ref *)a)->key,
                  ((const Dlk_seg_ref *)b)->key);
}

/* t's segments sorted by hash, each with the index of its first entry in
 * t's list (in `bytes`, which the search does not need). */
static dlk_status segs_by_key(const Dlk_tensor *t, Dlk_seg_ref **out,
                              dlk_error *err)
{
    *out = NULL;
    if (!t->nsegs)
        return DLK_OK;
    Dlk_seg_ref *v = malloc(t->nsegs * sizeof *v);
    if (!v)
        return Dlk_oom(err);
    uint64_t at = 0;
    for (size_t k = 0; k < t->nsegs; k++) {
        v[k] = t->segs[k];
        v[k].bytes = at;
        at += t->segs[k].nchunks;
    }
    qsort(v, t->nsegs, sizeof *v, cmp_seg);
    *out = v;
    return DLK_OK;
}

static const Dlk_seg_ref *seg_find(const Dlk_seg_ref *v, size_t n,
                                   const char *key)
{
    Dlk_seg_ref probe;
    memcpy(probe.key, key, 33);
    return n ? bsearch(&probe, v, n, sizeof *v, cmp_seg) : NULL;
}

/* A head entry that the parent may lack, and whether it was found. */
typedef struct cand {
    const Dlk_chunk_entry *e;
    bool found;
} cand;

static int cmp_cand(const void *a, const void *b)
{
    return strcmp(((const cand *)a)->e->key, ((const cand *)b)->e->key);
}

/* Mark the candidates whose hash is that of parent entry e. */
static void mark(cand *c, size_t n, const Dlk_chunk_entry *e)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(c[mid].e->key, e->key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < n && strcmp(c[lo].e->key, e->key) == 0; lo++)
        c[lo].found = true;
}

/* Entries of head tensor t whose hash parent tensor p (perhaps pending)
 * does not hold: the entries of a segment both name are in both, so only
 * the others are candidates; each is looked for among p's entries, read
 * only where p's segment is not t's (formats/dlk-v1.md 6.1). */
static dlk_status added_in(dlk_dataset *ds, const Dlk_tensor *t,
                           const Dlk_tensor *p, const char *doc,
                           uint64_t *bytes, uint64_t *chunks, dlk_error *err)
{
    Dlk_seg_ref *mine = NULL, *theirs = NULL;
    cand *c = malloc((t->nchunks ? t->nchunks : 1) * sizeof *c);
    size_t nc = 0;
    dlk_status rc = c ? DLK_OK : Dlk_oom(err);
    if (!rc)
        rc = segs_by_key(t, &mine, err);
    if (!rc)
        rc = segs_by_key(p, &theirs, err);
    /* the candidates: t's entries outside the segments p names too */
    size_t at = 0;
    for (size_t k = 0; !rc && k <= t->nsegs; k++) {
        size_t n = k < t->nsegs ? t->segs[k].nchunks : t->nchunks - at;
        bool shared = k < t->nsegs &&
                      seg_find(theirs, p->nsegs, t->segs[k].key);
        for (size_t i = 0; !shared && i < n && at + i < t->nchunks; i++)
            c[nc++] = (cand){&t->chunks[at + i], false};
        at += n;
    }
    if (!rc && nc)
        qsort(c, nc, sizeof *c, cmp_cand);
    /* p's entries: its tail, its segments (t's copy where t names them) */
    size_t pt;
    const Dlk_chunk_entry *ptail = Dlk_tensor_tail(p, &pt);
    for (size_t i = 0; !rc && nc && i < pt; i++)
        mark(c, nc, &ptail[i]);
    for (size_t k = 0; !rc && nc && p->segs_pending && k < p->nsegs; k++) {
        const Dlk_seg_ref *g = &p->segs[k];
        const Dlk_seg_ref *m = seg_find(mine, t->nsegs, g->key);
        if (m && m->bytes + g->nchunks <= t->nchunks) {
            for (size_t i = 0; i < g->nchunks; i++)
                mark(c, nc, &t->chunks[m->bytes + i]);
        } else {
            Dlk_chunk_entry *e;
            if ((rc = Dlk_segment_read(ds, g, doc, &e, err)))
                break;
            for (size_t i = 0; i < g->nchunks; i++)
                mark(c, nc, &e[i]);
            free(e);
        }
    }
    for (size_t i = 0; !rc && i < nc; i++)
        if (!c[i].found) {
            *bytes += c[i].e->stored_bytes;
            (*chunks)++;
        }
    free(c);
    free(mine);
    free(theirs);
    return rc;
}

/* Chunks (and their bytes) in head that parent does not hold
 * (formats/dlk-v1.md 6.1). */
static dlk_status count_added(dlk_dataset *ds, const Dlk_manifest *head,
                              const Dlk_manifest *parent,
                              const char *parent_doc, uint64_t *bytes,
                              uint64_t *chunks, dlk_error *err)
{
    *bytes = *chunks = 0;
    for (size_t i = 0; i < head->ntensors; i++) {
        const Dlk_tensor *t = &head->tensors[i];
        const Dlk_tensor *p = NULL;
        for (size_t j = 0; parent && j < parent->ntensors; j++)
            if (strcmp(parent->tensors[j].spec.name, t->spec.name) == 0)
                p = &parent->tensors[j];
        if (p) {
            dlk_status rc = added_in(ds, t, p, parent_doc, bytes, chunks,
                                     err);
            if (rc)
                return rc;
            continue;
        }
        for (size_t c = 0; c < t->nchunks; c++) {
            *bytes += t->chunks[c].stored_bytes;
            (*chunks)++;
        }
    }
    return DLK_OK;
}

/* Does the store honour create-only writes?  Two create-only puts of one
 * probe object: the second must be refused. */
static dlk_status probe_conditional(dlk_dataset *ds, bool *ok, dlk_error *err)
{
    uint8_t rnd[8] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return Dlk_fail(err, DLK_EIO, "cannot read random bytes");
    char key[64];
    snprintf(key, sizeof key, "refs/probe-%02x%02x%02x%02x%02x%02x%02x%02x",
             rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    dlk_status rc = Dlk_store_put(ds->store, key, "1", 1, DLK_PUT_IF_ABSENT,
                                  NULL, NULL, err);
    /* a random key cannot exist: EEXIST here is our own first attempt,
     * whose answer was lost and retried */
    if (rc && rc != DLK_EEXIST)
        return rc;
    rc = Dlk_store_put(ds->store, key, "2", 1, DLK_PUT_IF_ABSENT, NULL, NULL,
                       err);
    if (rc && rc != DLK_EEXIST) {
        /* a failure of the write itself (a full disk, the network) says
         * nothing about conditional writes: report it as it is */
        Dlk_store_del(ds->store, key, NULL);
        return rc;
    }
    *ok = rc == DLK_EEXIST;
    Dlk_error_clear(err);
    rc = Dlk_store_del(ds->store, key, err);
    return rc == DLK_ENOTFOUND ? DLK_OK : rc;
}

static void utc_now(char out[32])
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Serialize the commit document of head on top of parent. */
static dlk_status commit_doc(dlk_dataset *ds, const char *parent_id,
                             const Dlk_manifest *parent, const char *message,
                             char **text, dlk_error *err)
{
    Dlk_manifest m = ds->m;
    m.parent = (char *)parent_id;
    m.nwrites = 0; /* the head's history of publishes is not a state's */
    char *mtext;
    size_t mlen;
    uint64_t bytes, chunks;
    char pkey[128];
    snprintf(pkey, sizeof pkey, DLK_KEY_COMMITS "%s.json",
             parent_id ? parent_id : "");
    dlk_status rc = count_added(ds, &ds->m, parent, pkey, &bytes, &chunks,
                                err);
    if (rc || (rc = Dlk_manifest_dump(&m, &mtext, &mlen, err)))
        return rc;
    json_t *doc = json_loadb(mtext, mlen, 0, NULL);
    free(mtext);
    char now[32];
    utc_now(now);
    if (!doc)
        return Dlk_oom(err);
    /* keep "tensors" last: readers of the log need only the start */
    json_t *tensors = json_incref(json_object_get(doc, "tensors"));
    json_object_del(doc, "tensors");
    json_object_set_new(doc, "time", json_string(now));
    json_object_set_new(doc, "message", json_string(message ? message : ""));
    json_object_set_new(doc, "stats",
                        json_pack("{s:I,s:I}", "bytes_added", (json_int_t)bytes,
                                  "chunks_added", (json_int_t)chunks));
    json_object_set_new(doc, "tensors", tensors);
    *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (!*text)
        return Dlk_oom(err);
    return DLK_OK;
}

/* Whether ds may commit with this message: its written rows flushed
 * and, unless the caller vouches for a single writer, its store
 * honouring conditional writes. */
static dlk_status ready_to_commit(dlk_dataset *ds, const char *message,
                                  unsigned flags, dlk_error *err)
{
    if (ds->read_only)
        return Dlk_fail(err, DLK_EINVAL, "a dataset opened at a commit "
                        "cannot commit");
    if (message) {
        json_t *js = strlen(message) <= 65536 ? json_string(message) : NULL;
        if (!js)
            return Dlk_fail(err, DLK_EINVAL, "commit message must be valid "
                            "UTF-8 of at most 64 KiB");
        json_decref(js);
    }
    dlk_status rc = dlk_dataset_flush(ds, err);
    if (rc)
        return rc;
    if (!(flags & DLK_COMMIT_UNSAFE_SINGLE_WRITER)) {
        bool ok = false;
        if ((rc = probe_conditional(ds, &ok, err)))
            return rc;
        if (!ok)
            return Dlk_fail(err, DLK_EUNSUPPORTED, "the store of '%s' does "
                            "not honour conditional writes, so a concurrent "
                            "commit could be lost; refusing to commit (pass "
                            "--unsafe-single-writer if no other writer runs)",
                            ds->url);
    }
    return DLK_OK;
}

dlk_status dlk_commit(dlk_dataset *ds, const char *message, unsigned flags,
                      char id_out[DLK_ID_MAX], int *committed, dlk_error *err)
{
    *committed = 0;
    dlk_status rc = ready_to_commit(ds, message, flags, err);
    if (rc)
        return rc;
    for (int round = 0; round < COMMIT_ROUNDS; round++) {
        char parent_id[DLK_ID_MAX], etag[DLK_ETAG_MAX];
        bool exists;
        if ((rc = Dlk_ref_read(ds, parent_id, etag, &exists, err)))
            return rc;
        Dlk_manifest parent;
        memset(&parent, 0, sizeof parent);
        if (exists &&
            (rc = Dlk_commit_load(ds, parent_id, &parent, NULL, NULL, NULL,
                                  NULL, err)))
            return rc;
        if (exists && same_content(&ds->m, &parent)) {
            Dlk_manifest_free(&parent);
            strcpy(id_out, parent_id);
            return DLK_OK; /* nothing to commit */
        }
        char *text = NULL;
        rc = commit_doc(ds, exists ? parent_id : NULL,
                        exists ? &parent : NULL, message, &text, err);
        Dlk_manifest_free(&parent);
        if (rc)
            return rc;
        char id[33], key[128], line[40];
        Dlk_hash128_hex(text, strlen(text), id);
        commit_key(key, sizeof key, id);
        rc = Dlk_store_put(ds->store, key, text, strlen(text),
                           DLK_PUT_IF_ABSENT, NULL, NULL, err);
        free(text);
        if (rc && rc != DLK_EEXIST)
            return rc;
        snprintf(line, sizeof line, "%s\n", id);
        rc = Dlk_store_put(ds->store, DLK_KEY_MAIN, line, strlen(line),
                           exists ? DLK_PUT_IF_MATCH : DLK_PUT_IF_ABSENT,
                           exists ? etag : NULL, NULL, err);
        if (rc == DLK_ECONFLICT || rc == DLK_EEXIST) {
            /* main moved: by another writer, or by our own update whose
             * answer was lost and whose retry was then refused */
            Dlk_error_clear(err);
            if (in_history(ds, id, exists ? parent_id : NULL)) {
                rc = DLK_OK;
            } else {
                continue; /* commit again on top of it */
            }
        }
        if (rc)
            return rc;
        strcpy(id_out, id);
        free(ds->head);
        ds->head = strdup(id);
        *committed = 1;
        return DLK_OK;
    }
    return Dlk_fail(err, DLK_ECONFLICT, "main of '%s' kept moving under "
                    "concurrent commits; nothing was lost, retry the "
                    "commit", ds->url);
}

int dlk_dataset_dirty(dlk_dataset *ds, dlk_error *err)
{
    if (ds->read_only)
        return 0;
    char id[DLK_ID_MAX];
    bool exists;
    dlk_status rc = Dlk_ref_read(ds, id, NULL, &exists, err);
    if (rc)
        return -(int)rc;
    if (!exists) {
        for (size_t i = 0; i < ds->m.ntensors; i++)
            if (ds->m.tensors[i].nchunks)
                return 1;
        return 0;
    }
    Dlk_manifest m;
    if ((rc = Dlk_commit_load(ds, id, &m, NULL, NULL, NULL, NULL, err)))
        return -(int)rc;
    int dirty = !same_content(&ds->m, &m);
    Dlk_manifest_free(&m);
    return dirty;
}

dlk_status dlk_log(dlk_dataset *ds, const char *at, size_t max,
                   dlk_log_fn fn, void *ud, dlk_error *err)
{
    char id[DLK_ID_MAX], via[DLK_ID_MAX];
    dlk_status rc = Dlk_resolve_via(ds, at && *at ? at : "main", id, via,
                                    err);
    if (rc == DLK_ENOTFOUND && !(at && *at)) {
        Dlk_error_clear(err);
        return DLK_OK; /* no commits: an empty log */
    }
    for (size_t n = 0; !rc && (max == 0 || n < max); n++) {
        Dlk_manifest m;
        char *time = NULL, *message = NULL;
        dlk_log_entry e;
        memset(&e, 0, sizeof e);
        rc = Dlk_commit_follow(ds, via, id, &m, &time, &message,
                               &e.bytes_added, &e.chunks_added, NULL, err);
        if (rc)
            break;
        const char **names = calloc(m.ntensors + 1, sizeof *names);
        uint64_t *samples = calloc(m.ntensors + 1, sizeof *samples);
        if (!names || !samples) {
            rc = Dlk_oom(err);
        } else {
            for (size_t i = 0; i < m.ntensors; i++) {
                names[i] = m.tensors[i].spec.name;
                samples[i] = m.tensors[i].samples;
            }
            e.id = id;
            e.parent = m.parent;
            e.time = time;
            e.message = message;
            e.ntensors = m.ntensors;
            e.tensor_names = names;
            e.samples = samples;
            int stop = fn(ud, &e);
            if (!m.parent || stop) {
                max = n + 1; /* end of history, or the caller stopped */
            } else { /* a commit id: Dlk_commit_parse checked it */
                strcpy(via, id);
                strcpy(id, m.parent);
            }
        }
        free(names);
        free(samples);
        free(time);
        free(message);
        Dlk_manifest_free(&m);
    }
    return rc;
}
