/* part_check.h - a span's parts checked on a CUDA device after their copy
 * (verify.cu's kernel against the hashes the chunk stores): each check
 * queued as its copy is, and launched by a thread of its own once that
 * copy is over (part_check.c says why). */
#ifndef DLK_PART_CHECK_H
#define DLK_PART_CHECK_H

#include "device.h"

#include <cuda_runtime_api.h>

typedef struct Dlk_part_checker Dlk_part_checker;
typedef struct Dlk_check_job Dlk_check_job;

/* The kernel's time on the device, from event a to event b, which the
 * callee owns from then on (DLK_CUDA_TRACE's `check` lines). */
typedef void (*Dlk_check_timed)(void *ud, cudaEvent_t a, cudaEvent_t b);

/* The checker of CUDA device `device` (the caller's current one): its
 * kernel's keys, streams, mismatch record and thread; timed (NULL: none)
 * gets each check's events.  NULL *out and the error when any of them
 * cannot be made. */
cudaError_t Dlk_part_checker_new(int device, Dlk_check_timed timed, void *ud,
                                 Dlk_part_checker **out);
/* The check of n parts of the device bytes at dev, once the copy that
 * records `copied` is over (the caller keeps that event until the job is
 * forgotten); tag comes back with a part that does not match. */
cudaError_t Dlk_part_check_submit(Dlk_part_checker *ck, cudaEvent_t copied,
                                  const void *dev, const Dlk_vpart *parts,
                                  uint32_t n, uint64_t tag,
                                  Dlk_check_job **job);
/* Waits for the job's check.  *mismatch: a part of it, or of any check on
 * this device before it, did not match; *bad then says which (the first
 * found). */
cudaError_t Dlk_part_check_wait(Dlk_part_checker *ck, Dlk_check_job *job,
                                bool *mismatch, Dlk_vbad *bad);
/* The job's check over (it reads the device bytes), and the job freed. */
void Dlk_part_check_forget(Dlk_part_checker *ck, Dlk_check_job *job);
/* Every queued check launched and over, the thread stopped, all freed. */
void Dlk_part_checker_free(Dlk_part_checker *ck);

#endif
