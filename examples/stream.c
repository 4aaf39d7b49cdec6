/* stream.c - stream a dlk dataset into GPU memory (or host memory where
 * there is no GPU) through libdlk, the way a training loop would.
 *
 *   cc -O2 stream.c $(pkg-config --cflags --libs dlk) -o stream
 *   ./stream DATASET [cuda:0|cpu|auto] [RANK WORLD]
 *
 * Each batch's tensors are device pointers when batch->on_device is set:
 * hand them to your framework (for PyTorch, wrap them with DLPack).  The
 * state printed at the end can be saved with a checkpoint and passed to
 * dlk_loader_restore() to continue mid-epoch, with any number of ranks. */
#include <dlk.h>
#include <dlk_bench.h> /* dlk_loader_step, dlk_loader_checksums */

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATASET [DEVICE] [RANK WORLD]\n", argv[0]);
        return 2;
    }
    dlk_error err;
    dlk_dataset *ds;
    /* An s3:// dataset's endpoint, region and credentials: the library
     * reads no environment, so a program passes what it uses (here the
     * AWS tools' variables; NULL fields are defaults, no keys is
     * anonymous). */
    dlk_store_options so = DLK_STORE_OPTIONS_INIT;
    so.s3_endpoint = getenv("AWS_ENDPOINT_URL");
    so.s3_region = getenv("AWS_REGION");
    so.s3_access_key_id = getenv("AWS_ACCESS_KEY_ID");
    so.s3_secret_access_key = getenv("AWS_SECRET_ACCESS_KEY");
    so.s3_session_token = getenv("AWS_SESSION_TOKEN");
    if (dlk_dataset_open_with(argv[1], NULL, &so, &ds, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
    o.batch_size = 64;
    o.shuffle = 1;
    o.seed = 1234;
    o.device = argc > 2 ? argv[2] : "auto";
    o.rank = argc > 4 ? (uint32_t)atoi(argv[3]) : 0;
    o.world_size = argc > 4 ? (uint32_t)atoi(argv[4]) : 1;
    o.check = 1;
    dlk_loader *l;
    if (dlk_loader_open(ds, &o, &l, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        dlk_dataset_free(ds);
        return 1;
    }
    for (int epoch = 0; epoch < 2; epoch++) {
        const dlk_batch *b;
        uint64_t samples = 0, batches = 0;
        dlk_status rc;
        /* err is set only when a call fails: test the status it returns */
        while ((rc = dlk_loader_next(l, &b, &err)) == DLK_OK && b) {
            /* your training step here; this one reads every byte */
            if ((rc = dlk_loader_step(l, 0, &err)) != DLK_OK)
                break;
            samples += b->size;
            batches++;
            if (batches == 1 && epoch == 0)
                for (size_t t = 0; t < b->ntensors; t++)
                    printf("tensor %s: %zu bytes per batch on the %s\n",
                           b->tensors[t].name, b->tensors[t].nbytes,
                           b->on_device ? "GPU" : "CPU");
        }
        if (rc != DLK_OK) {
            fprintf(stderr, "%s\n", err.msg);
            break;
        }
        printf("epoch %d: %llu samples in %llu batches\n", epoch,
               (unsigned long long)samples, (unsigned long long)batches);
    }
    uint64_t dev, host;
    dlk_loader_checksums(l, &dev, &host);
    printf("checksums: device %016llx, host %016llx (%s)\n",
           (unsigned long long)dev, (unsigned long long)host,
           dev == host ? "equal" : "DIFFERENT");
    dlk_loader_state st;
    dlk_loader_state_get(l, &st);
    char *js = dlk_loader_state_json(&st);
    printf("state to save: %s\n", js ? js : "?");
    free(js);
    dlk_loader_close(l);
    dlk_dataset_free(ds);
    return dev == host ? 0 : 1;
}
