/* launch.c - rank, world size, local rank and local world size from a
 * launcher's environment (torchrun, Lightning's DDP launcher, Open MPI,
 * Slurm).  The one place the library reads the environment, on purpose:
 * dlk_launch_env is documented as reading the launcher's variables, and the
 * loader itself takes rank and world size only through its options. */
#include "util/error.h"

#include <errno.h>
#include <stdlib.h>

/* Variable `name` parsed into *out; 0 when it is not set (*out kept), 1
 * when it is, -1 (with err) when it is not a number in range. */
static int one_env(const char *name, uint32_t *out, dlk_error *err)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || *end || n < 0 || n > (long long)UINT32_MAX) {
        Dlk_fail(err, DLK_EINVAL, "bad %s '%.40s' (a number from 0 is "
                 "expected)", name, v);
        return -1;
    }
    *out = (uint32_t)n;
    return 1;
}

/* The first of `names` that is set, parsed into *out (kept otherwise). */
static dlk_status from_env(const char *const names[3], uint32_t *out,
                           dlk_error *err)
{
    for (int i = 0; i < 3; i++) {
        int r = one_env(names[i], out, err);
        if (r)
            return r < 0 ? DLK_EINVAL : DLK_OK;
    }
    return DLK_OK;
}

/* With WORLD_SIZE set, the rank is torch's: RANK, or where a launcher sets
 * only the node's rank and the local rank (Lightning's DDP launcher:
 * WORLD_SIZE, NODE_RANK, LOCAL_RANK), NODE_RANK x LOCAL_WORLD_SIZE +
 * LOCAL_RANK; on node 0, or on one node (LOCAL_WORLD_SIZE = WORLD_SIZE),
 * the local rank is the rank as every node runs as many processes.
 * Another launcher's rank (SLURM_PROCID under an srun that started the
 * launcher) is not taken: it numbers other processes.  A world above 1
 * with none of these is refused, as every process would read rank 0's
 * rows. */
static dlk_status torch_rank(uint32_t world, uint32_t *rank, dlk_error *err)
{
    uint32_t local = 0, node = 0, local_world = 0;
    int r = one_env("RANK", rank, err);
    if (r)
        return r < 0 ? DLK_EINVAL : DLK_OK;
    int has_local = one_env("LOCAL_RANK", &local, err);
    int has_node = has_local < 0 ? 0 : one_env("NODE_RANK", &node, err);
    if (!has_node && has_local >= 0)
        has_node = one_env("GROUP_RANK", &node, err);
    int has_lw = has_local < 0 || has_node < 0
                     ? 0 : one_env("LOCAL_WORLD_SIZE", &local_world, err);
    if (has_local < 0 || has_node < 0 || has_lw < 0)
        return DLK_EINVAL;
    if (has_local && has_node && has_lw && local_world) {
        /* one above the world is the loader's to refuse, naming it */
        uint64_t n = (uint64_t)node * local_world + local;
        *rank = n > UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)n;
        return DLK_OK;
    }
    if (has_local && ((has_node && node == 0) ||
                      (!has_node && has_lw && local_world == world))) {
        *rank = local;
        return DLK_OK;
    }
    if (world <= 1) {
        *rank = 0;
        return DLK_OK;
    }
    *rank = DLK_LAUNCH_NO_RANK;
    if (has_local && has_node)
        return Dlk_fail(err, DLK_EINVAL, "WORLD_SIZE %u without RANK, and "
                        "NODE_RANK %u without LOCAL_WORLD_SIZE: the rank "
                        "cannot be known (give the rank)", world, node);
    return Dlk_fail(err, DLK_EINVAL, "WORLD_SIZE %u without RANK (or "
                    "LOCAL_RANK with NODE_RANK): the rank cannot be known "
                    "(give the rank)", world);
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
    *out = l;
    dlk_status rc = from_env(world, &l.world_size, err);
    if (!rc)
        rc = from_env(local, &l.local_rank, err);
    if (!rc)
        rc = from_env(local_world, &l.local_world_size, err);
    if (!rc && !l.local_world_size)
        l.local_world_size = 1;
    if (rc)
        return rc;
    const char *ws = getenv("WORLD_SIZE");
    if (ws && *ws)
        rc = torch_rank(l.world_size, &l.rank, err);
    else
        rc = from_env(rank, &l.rank, err);
    if (rc && l.rank != DLK_LAUNCH_NO_RANK)
        return rc;
    *out = l;
    return rc;
}

int dlk_launch_gpu(const dlk_launch *l, int ngpus)
{
    return ngpus < 1 ? -1 : (int)(l->local_rank % (uint32_t)ngpus);
}
