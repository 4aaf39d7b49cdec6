/* caller.c - a program built against an older dlk.h, run on today's
 * libdlk.so (tests/t/t600-abi.sh builds it twice: against dlk.h, and
 * against a copy whose versioned structs are cut to a smaller, older
 * layout).  Guard bytes after each struct show that the library reads
 * and writes nothing past the size the program's header had.
 *
 *   caller DATASET    prints what the loader ran with, one "key value"
 *                     a line, or "FAIL why" */
#include <dlk.h>

#include <stdio.h>
#include <string.h>

#define GUARD 0xA5
#define NGUARD 256

static int guard_intact(const unsigned char *g)
{
    for (size_t i = 0; i < NGUARD; i++)
        if (g[i] != GUARD)
            return 0;
    return 1;
}

static int make_dataset(const char *url)
{
    dlk_error err;
    dlk_tensor_spec spec;
    dlk_dataset *ds;
    if (dlk_tensor_spec_parse("labels:i32", &spec, &err) ||
        dlk_dataset_create(url, &spec, 1, &ds, &err)) {
        printf("FAIL create: %s\n", err.msg);
        return -1;
    }
    for (int32_t i = 0; i < 100; i++)
        if (dlk_append(ds, 0, &i, sizeof i, NULL, 0, &err)) {
            printf("FAIL append: %s\n", err.msg);
            return -1;
        }
    if (dlk_dataset_close(ds, &err)) {
        printf("FAIL close: %s\n", err.msg);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 || make_dataset(argv[1]))
        return 1;
    dlk_error err;
    dlk_dataset *ds;
    if (dlk_dataset_open(argv[1], NULL, &ds, &err)) {
        printf("FAIL open: %s\n", err.msg);
        return 1;
    }
    printf("opts_size %zu\nstats_size %zu\n", sizeof(dlk_loader_opts),
           sizeof(dlk_loader_stats));
    /* the options, then bytes a reader past them would take for a
     * local_world_size of 0xA5A5A5A5 and a device pointer of garbage */
    struct { dlk_loader_opts o; unsigned char g[NGUARD]; } o;
    memset(&o, GUARD, sizeof o);
    memset(&o.o, 0, sizeof o.o);
    o.o.size = 0;
    dlk_loader *l;
    dlk_status rc = dlk_loader_open(ds, &o.o, &l, &err);
    printf("size0 %d %s\n", (int)rc, rc ? err.msg : "");
    if (!rc)
        dlk_loader_close(l);
    dlk_ingest_opts io;
    memset(&io, 0, sizeof io);
    dlk_tensor_spec *specs;
    size_t nspecs;
    rc = dlk_ingest_infer(&io, &specs, &nspecs, &err);
    printf("ingest_size0 %d %s\n", (int)rc, rc ? err.msg : "");
    dlk_loader_opts_init(&o.o);
    printf("init_size_kept %d\n", o.o.size == sizeof o.o);
    o.o.batch_size = 10;
    if (dlk_loader_open(ds, &o.o, &l, &err)) {
        printf("FAIL loader: %s\n", err.msg);
        return 1;
    }
    const dlk_batch *b;
    uint64_t samples = 0;
    while ((rc = dlk_loader_next(l, &b, &err)) == DLK_OK && b)
        samples += b->size;
    if (rc) {
        printf("FAIL next: %s\n", err.msg);
        return 1;
    }
    printf("samples %llu\n", (unsigned long long)samples);
    printf("opts_guard %d\n", guard_intact(o.g));

    struct { dlk_loader_stats s; unsigned char g[NGUARD]; } st;
    memset(&st, GUARD, sizeof st);
    st.s.size = 0;
    dlk_loader_stats_get(l, &st.s);
    unsigned char first = ((unsigned char *)&st.s)[sizeof(size_t)];
    printf("stats0_untouched %d\n", first == GUARD && guard_intact(st.g));
    memset(&st, GUARD, sizeof st);
    st.s.size = sizeof st.s;
    dlk_loader_stats_get(l, &st.s);
    printf("stats_size_kept %d\n", st.s.size == sizeof st.s);
    printf("stats_guard %d\n", guard_intact(st.g));
    printf("batches %llu\nstats_samples %llu\nio_threads %u\n",
           (unsigned long long)st.s.batches,
           (unsigned long long)st.s.samples, st.s.io_threads);
    dlk_loader_close(l);

    /* a query's options and result, each with guard bytes after it */
    struct { dlk_select_opts o; unsigned char g[NGUARD]; } so;
    struct { dlk_select_result r; unsigned char g[NGUARD]; } sr;
    memset(&so, GUARD, sizeof so);
    memset(&sr, GUARD, sizeof sr);
    dlk_select_opts_init(&so.o);
    so.o.where = "labels < 10";
    sr.r.size = 0;
    rc = dlk_select(ds, &so.o, &sr.r, &err);
    printf("result_size0 %d %s\n", (int)rc, rc ? err.msg : "");
    dlk_select_result_init(&sr.r);
    if ((rc = dlk_select(ds, &so.o, &sr.r, &err))) {
        printf("FAIL select: %s\n", err.msg);
        return 1;
    }
    printf("select_n %llu\nselect_last %llu\n", (unsigned long long)sr.r.n,
           (unsigned long long)(sr.r.n ? sr.r.rows[sr.r.n - 1] : 0));
    dlk_select_result_free(&sr.r);
    printf("select_guards %d\n", guard_intact(so.g) && guard_intact(sr.g) &&
           sr.r.size == sizeof sr.r && !sr.r.rows);

    /* the dataset's own calls: verify, gc and compact with their options
     * and results, and a store's options, each with guard bytes after */
    struct { dlk_verify_opts o; unsigned char g[NGUARD]; } vo;
    struct { dlk_verify_result r; unsigned char g[NGUARD]; } vr;
    memset(&vo, GUARD, sizeof vo);
    memset(&vr, GUARD, sizeof vr);
    dlk_verify_opts_init(&vo.o);
    vo.o.deep = 1;
    vr.r.size = 0;
    rc = dlk_verify(ds, &vo.o, &vr.r, &err);
    printf("verify_size0 %d %s\n", (int)rc, rc ? err.msg : "");
    dlk_verify_result_init(&vr.r);
    if ((rc = dlk_verify(ds, &vo.o, &vr.r, &err))) {
        printf("FAIL verify: %s\n", err.msg);
        return 1;
    }
    printf("verify_chunks %llu\nverify_problems %llu\n",
           (unsigned long long)vr.r.chunks_checked,
           (unsigned long long)vr.r.problems);
    printf("verify_guards %d\n", guard_intact(vo.g) && guard_intact(vr.g) &&
           vr.r.size == sizeof vr.r);

    struct { dlk_gc_opts o; unsigned char g[NGUARD]; } go;
    struct { dlk_gc_result r; unsigned char g[NGUARD]; } gr;
    memset(&go, GUARD, sizeof go);
    memset(&gr, GUARD, sizeof gr);
    go.o.size = 0;
    dlk_gc_result_init(&gr.r);
    rc = dlk_gc(ds, &go.o, &gr.r, &err);
    printf("gc_size0 %d %s\n", (int)rc, rc ? err.msg : "");
    dlk_gc_opts_init(&go.o);
    go.o.dry_run = 1;
    memset(&gr, GUARD, sizeof gr);
    dlk_gc_result_init(&gr.r);
    if ((rc = dlk_gc(ds, &go.o, &gr.r, &err))) {
        printf("FAIL gc: %s\n", err.msg);
        return 1;
    }
    printf("gc_removed %llu\n", (unsigned long long)gr.r.removed);
    printf("gc_guards %d\n", guard_intact(go.g) && guard_intact(gr.g) &&
           gr.r.size == sizeof gr.r);

    struct { dlk_compact_opts o; unsigned char g[NGUARD]; } co;
    struct { dlk_compact_result r; unsigned char g[NGUARD]; } cr;
    memset(&co, GUARD, sizeof co);
    memset(&cr, GUARD, sizeof cr);
    dlk_compact_opts_init(&co.o);
    dlk_compact_result_init(&cr.r);
    if ((rc = dlk_compact(ds, &co.o, &cr.r, &err))) {
        printf("FAIL compact: %s\n", err.msg);
        return 1;
    }
    printf("compact_before %llu\n", (unsigned long long)cr.r.chunks_before);
    printf("compact_guards %d\n", guard_intact(co.g) && guard_intact(cr.g) &&
           cr.r.size == sizeof cr.r);
    dlk_dataset_free(ds);

    struct { dlk_store_options o; unsigned char g[NGUARD]; } st_o;
    memset(&st_o, GUARD, sizeof st_o);
    st_o.o.size = 0;
    rc = dlk_dataset_open_with(argv[1], NULL, &st_o.o, &ds, &err);
    printf("store_size0 %d %s\n", (int)rc, rc ? err.msg : "");
    if (!rc)
        dlk_dataset_free(ds);
    dlk_store_options_init(&st_o.o);
    if ((rc = dlk_dataset_open_with(argv[1], NULL, &st_o.o, &ds, &err))) {
        printf("FAIL open with: %s\n", err.msg);
        return 1;
    }
    printf("store_guard %d\n", guard_intact(st_o.g));
    dlk_dataset_free(ds);
    return 0;
}
