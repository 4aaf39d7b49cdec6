/* verify.c - checking every chunk that the opened state references. */
#include "dataset.h"

#include <stdio.h>
#include <string.h>

static void problem(const dlk_verify_opts *o, dlk_verify_result *res,
                    const char *object, const char *why)
{
    res->problems++;
    if (o && o->on_problem)
        o->on_problem(o->ud, object, why);
}

dlk_status dlk_verify(dlk_dataset *ds, const dlk_verify_opts *opts,
                      dlk_verify_result *res, dlk_error *err)
{
    (void)err;
    memset(res, 0, sizeof *res);
    bool deep = opts && opts->deep;
    for (size_t ti = 0; ti < ds->m.ntensors; ti++) {
        dlk_tensor *t = &ds->m.tensors[ti];
        for (size_t ci = 0; ci < t->nchunks; ci++) {
            const dlk_chunk_entry *e = &t->chunks[ci];
            char key[DLK_NAME_MAX + 64];
            snprintf(key, sizeof key, "%s%s/%s", DLK_KEY_CHUNKS, t->spec.name,
                     e->key);
            dlk_error cerr;
            dlk_error_clear(&cerr);
            dlk_chunk *c = NULL;
            /* decode checks header, index and, when deep, both payload
             * checksums after decompressing */
            dlk_status rc = dlk_chunk_load(ds, ti, ci,
                                           deep ? DLK_DECODE_VERIFY
                                                : DLK_DECODE_HEADER_ONLY,
                                           NULL, 0, &c, &cerr);
            res->chunks_checked++;
            if (rc) {
                problem(opts, res, key, cerr.msg);
                continue;
            }
            res->bytes_checked += c->object.len;
            /* the name is the hash of every byte of the object */
            char hash[33];
            dlk_hash128_hex(c->object.data, c->object.len, hash);
            if (strcmp(hash, e->key) != 0)
                problem(opts, res, key, "content does not match its name "
                        "(XXH3-128 checksum mismatch)");
            dlk_chunk_free(c);
        }
    }
    return DLK_OK;
}
