/* launch.c - rank, world size, local rank and local world size from a
 * launcher's environment (torchrun, Open MPI, Slurm).  The one place the
 * library reads the environment, on purpose: dlk_launch_env is documented as
 * reading the launcher's variables, and the loader itself takes rank and
 * world size only through its options. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

/* The first of `names` that is set, parsed into *out (kept otherwise). */
static dlk_status from_env(const char *const names[3], uint32_t *out,
                           dlk_error *err)
{
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        if (!v || !*v)
            continue;
        char *end;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (errno || *end || n < 0 || n > (long long)UINT32_MAX)
            return dlk_fail(err, DLK_EINVAL, "bad %s '%.40s' (a number "
                            "from 0 is expected)", names[i], v);
        *out = (uint32_t)n;
        return DLK_OK;
    }
    return DLK_OK;
}

dlk_status dlk_launch_env(dlk_launch *out, dlk_error *err)
{
    static const char *const rank[3] = {"RANK", "OMPI_COMM_WORLD_RANK",
                                        "SLURM_PROCID"};
    static const char *const world[3] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                         "SLURM_NTASKS"};
    static const char *const local[3] = {"LOCAL_RANK",
                                         "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "SLURM_LOCALID"};
    static const char *const local_world[3] = {
        "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
        "SLURM_NTASKS_PER_NODE"};
    dlk_launch l = {0, 1, 0, 1};
    dlk_status rc = from_env(rank, &l.rank, err);
    if (!rc)
        rc = from_env(world, &l.world_size, err);
    if (!rc)
        rc = from_env(local, &l.local_rank, err);
    if (!rc)
        rc = from_env(local_world, &l.local_world_size, err);
    if (!rc && !l.local_world_size)
        l.local_world_size = 1;
    if (rc)
        return rc;
    *out = l;
    return DLK_OK;
}

int dlk_launch_gpu(const dlk_launch *l, int ngpus)
{
    return ngpus < 1 ? -1 : (int)(l->local_rank % (uint32_t)ngpus);
}
