/* test_loader_keep.c - batches kept past the next one (dlk_loader_keep /
 * _release), the batch count before an epoch's first batch, consumer
 * stream ordering on the cpu, and the launcher's rank from the
 * environment (dlk_launch_env) and its default GPU (dlk_launch_gpu). */
#include "dlk.h"
#include "unit.h"

#include <unistd.h>

static char dir[256];

/* n samples: images u8 4x4x3 whose bytes are the row's, labels i64 = row */
static int make_dataset(uint64_t n)
{
    snprintf(dir, sizeof dir, "/tmp/dlk-test-keep-%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return -1;
    dlk_tensor_spec s[2];
    if (dlk_tensor_spec_parse("images:u8:4x4x3", &s[0], NULL) ||
        dlk_tensor_spec_parse("labels:i64", &s[1], NULL))
        return -1;
    s[0].chunk_bytes = 48 * 8;
    dlk_dataset *ds;
    if (dlk_dataset_create(dir, s, 2, &ds, NULL))
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t img[48];
        memset(img, (int)(i & 0xff), sizeof img);
        int64_t shape[3] = {4, 4, 3}, label = (int64_t)i;
        if (dlk_append(ds, 0, img, 48, shape, 3, NULL) ||
            dlk_append(ds, 1, &label, 8, NULL, 0, NULL))
            return -1;
    }
    return dlk_dataset_close(ds, NULL) ? -1 : 0;
}

/* every image of a batch holds its row's byte */
static bool batch_right(const uint8_t *imgs, const uint64_t *rows, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 48; k++)
            if (imgs[i * 48 + k] != (uint8_t)(rows[i] & 0xff))
                return false;
    return true;
}

static void test_keep(void)
{
    const uint64_t n = 100;
    if (make_dataset(n)) {
        UNIT_CHECK("make a dataset", 0);
        return;
    }
    dlk_dataset *ds;
    dlk_error err;
    if (dlk_dataset_open(dir, NULL, &ds, &err)) {
        UNIT_CHECK(err.msg, 0);
        return;
    }
    dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
    o.batch_size = 8;
    o.shuffle = 1;
    o.seed = 3;
    o.io_threads = 2;
    dlk_loader *l;
    if (dlk_loader_open(ds, &o, &l, &err)) {
        UNIT_CHECK(err.msg, 0);
        dlk_dataset_free(ds);
        return;
    }
    UNIT_CHECK("batches before the first: ceil(100 / 8)",
               dlk_loader_batches(l) == 13);
    dlk_kept *k[16] = {0};
    UNIT_CHECK("keep without a batch is refused",
               dlk_loader_keep(l, &k[0], &err) == DLK_EINVAL && !k[0] &&
                   strstr(err.msg, "no current batch"));
    /* keep every batch of the epoch: each its own memory, none changed by
     * the batches after it */
    const dlk_batch *b;
    const uint8_t *data[16];
    uint64_t rows[16][8];
    size_t nb = 0;
    bool kept_ok = true, distinct = true, twice_refused = true;
    while (dlk_loader_next(l, &b, &err) == DLK_OK && b && nb < 16) {
        kept_ok &= dlk_loader_keep(l, &k[nb], &err) == DLK_OK;
        dlk_kept *again = NULL;
        twice_refused &= dlk_loader_keep(l, &again, &err) == DLK_EINVAL;
        data[nb] = b->tensors[0].data;
        memcpy(rows[nb], b->indices, b->size * sizeof *b->indices);
        for (size_t j = 0; j < nb; j++)
            distinct &= data[j] != data[nb];
        nb++;
    }
    UNIT_CHECK("every batch kept", kept_ok && nb == 13);
    UNIT_CHECK("a kept batch is not kept twice", twice_refused);
    UNIT_CHECK("kept batches have their own memory", distinct);
    bool right = true;
    for (size_t j = 0; j < nb; j++)
        right &= batch_right(data[j], rows[j], 8);
    UNIT_CHECK("kept batches keep their bytes to the epoch's end", right);
    UNIT_CHECK("stream ordering is nothing to do on the cpu",
               dlk_loader_stream_wait(l, NULL, &err) == DLK_OK);
    /* give half back: the next epoch gathers into those */
    for (size_t j = 0; j < nb; j += 2) {
        dlk_loader_release(l, k[j], NULL);
        k[j] = NULL;
    }
    bool reused = true;
    size_t nb2 = 0;
    while (dlk_loader_next(l, &b, &err) == DLK_OK && b) {
        bool found = false;
        for (size_t j = 0; j < nb; j += 2)
            found |= b->tensors[0].data == data[j];
        /* the loader's own buffer is taken from the spares the first time */
        reused &= found;
        right &= batch_right(b->tensors[0].data, b->indices, 8);
        nb2++;
    }
    UNIT_CHECK("buffers given back are reused", reused && nb2 == 13);
    right = true;
    for (size_t j = 1; j < nb; j += 2)
        right &= batch_right(data[j], rows[j], 8);
    UNIT_CHECK("batches still kept are untouched by the next epoch", right);
    /* close frees what is still kept (ASan and valgrind see a leak if not) */
    dlk_loader_close(l);
    dlk_dataset_free(ds);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

static void clear_env(void)
{
    const char *v[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK",
                       "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                       "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID",
                       "SLURM_NTASKS", "SLURM_LOCALID", "LOCAL_WORLD_SIZE",
                       "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE",
                       "NODE_RANK", "GROUP_RANK"};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        unsetenv(v[i]);
}

static void test_launch_env(void)
{
    dlk_launch l;
    dlk_error err;
    clear_env();
    UNIT_CHECK("no launcher: rank 0 of 1",
               dlk_launch_env(&l, &err) == DLK_OK && l.rank == 0 &&
                   l.world_size == 1 && l.local_rank == 0 &&
                   l.local_world_size == 1);
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_NTASKS_PER_NODE", "2", 1);
    UNIT_CHECK("slurm", dlk_launch_env(&l, &err) == DLK_OK && l.rank == 5 &&
                            l.world_size == 8 && l.local_rank == 1 &&
                            l.local_world_size == 2);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
    UNIT_CHECK("open mpi before slurm",
               dlk_launch_env(&l, &err) == DLK_OK && l.rank == 3 &&
                   l.world_size == 4 && l.local_rank == 3);
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "16", 1);
    setenv("LOCAL_RANK", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    UNIT_CHECK("torchrun first", dlk_launch_env(&l, &err) == DLK_OK &&
                                     l.rank == 2 && l.world_size == 16 &&
                                     l.local_rank == 2 &&
                                     l.local_world_size == 4);
    setenv("LOCAL_WORLD_SIZE", "0", 1);
    UNIT_CHECK("a local world of 0 counts as 1",
               dlk_launch_env(&l, &err) == DLK_OK && l.local_world_size == 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    setenv("WORLD_SIZE", "4x", 1);
    UNIT_CHECK("a bad value names its variable",
               dlk_launch_env(&l, &err) == DLK_EINVAL &&
                   strstr(err.msg, "WORLD_SIZE '4x'"));
    setenv("WORLD_SIZE", "-1", 1);
    UNIT_CHECK("a negative value is refused",
               dlk_launch_env(&l, &err) == DLK_EINVAL &&
                   l.rank != DLK_LAUNCH_NO_RANK);
    clear_env();
    /* Lightning's DDP launcher: WORLD_SIZE, NODE_RANK, LOCAL_RANK; under
     * an srun that started it, SLURM_PROCID numbers srun's tasks */
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("NODE_RANK", "0", 1);
    setenv("LOCAL_RANK", "1", 1);
    UNIT_CHECK("WORLD_SIZE, NODE_RANK 0, LOCAL_RANK 1: rank 1 of 2",
               dlk_launch_env(&l, &err) == DLK_OK && l.rank == 1 &&
                   l.world_size == 2 && l.local_rank == 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("NODE_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    UNIT_CHECK("node 1 of 4 a node, local rank 1: rank 5",
               dlk_launch_env(&l, &err) == DLK_OK && l.rank == 5);
    unsetenv("NODE_RANK");
    setenv("GROUP_RANK", "1", 1);
    UNIT_CHECK("torchrun's GROUP_RANK as the node's rank",
               dlk_launch_env(&l, &err) == DLK_OK && l.rank == 5);
    unsetenv("GROUP_RANK");
    setenv("LOCAL_WORLD_SIZE", "8", 1);
    UNIT_CHECK("one node (LOCAL_WORLD_SIZE = WORLD_SIZE): the local rank",
               dlk_launch_env(&l, &err) == DLK_OK && l.rank == 1);
    unsetenv("LOCAL_WORLD_SIZE");
    setenv("NODE_RANK", "1", 1);
    UNIT_CHECK("node 1, processes a node unknown: refused, the rest filled",
               dlk_launch_env(&l, &err) == DLK_EINVAL &&
                   l.rank == DLK_LAUNCH_NO_RANK && l.world_size == 8 &&
                   l.local_rank == 1 && strstr(err.msg, "NODE_RANK 1"));
    clear_env();
    setenv("WORLD_SIZE", "2", 1);
    UNIT_CHECK("WORLD_SIZE 2 alone: refused",
               dlk_launch_env(&l, &err) == DLK_EINVAL &&
                   l.rank == DLK_LAUNCH_NO_RANK &&
                   strstr(err.msg, "WORLD_SIZE 2 without RANK"));
    setenv("WORLD_SIZE", "1", 1);
    UNIT_CHECK("WORLD_SIZE 1 alone: rank 0",
               dlk_launch_env(&l, &err) == DLK_OK && l.rank == 0);
    clear_env();
}

/* The default GPU: the local rank, modulo the GPUs the process sees. */
static void test_launch_gpu(void)
{
    dlk_launch l = {5, 8, 3, 4};
    UNIT_CHECK("local rank 3 of 4 GPUs: cuda:3", dlk_launch_gpu(&l, 4) == 3);
    UNIT_CHECK("one GPU of its own (CUDA_VISIBLE_DEVICES): cuda:0",
               dlk_launch_gpu(&l, 1) == 0);
    UNIT_CHECK("8 ranks on 2 GPUs: in turn", dlk_launch_gpu(&l, 2) == 1);
    UNIT_CHECK("no GPU: -1", dlk_launch_gpu(&l, 0) == -1 &&
                                 dlk_launch_gpu(&l, -2) == -1);
}

int main(void)
{
    test_launch_env();
    test_launch_gpu();
    test_keep();
    return unit_done();
}
