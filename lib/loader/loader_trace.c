/* loader_trace.c - the timeline of a run: per batch, the time inside
 * dlk_loader_next, the waits for chunks split by the stage that was late,
 * and the consumer's time between calls.  Kept in a fixed array of
 * buckets that merge pairwise when full, so memory never grows with the
 * run's length (a million batches cost what 512 do). */
#include "loader_int.h"
#include "dlk_bench.h"

#include <string.h>

static void merge(dlk_trace_bucket *a, const dlk_trace_bucket *b)
{
    a->batches += b->batches;
    a->samples += b->samples;
    a->last_epoch = b->last_epoch;
    a->t1 = b->t1;
    a->next_s += b->next_s;
    a->wait_s += b->wait_s;
    for (int i = 0; i < DLK_LATE_N; i++)
        a->late_s[i] += b->late_s[i];
    if (b->buffer_bytes > a->buffer_bytes)
        a->buffer_bytes = b->buffer_bytes;
}

static void add(dlk_loader *l, const dlk_trace_bucket *b)
{
    if (!l->trace_per)
        l->trace_per = 1;
    if (l->ntrace && l->trace[l->ntrace - 1].batches < l->trace_per) {
        merge(&l->trace[l->ntrace - 1], b);
        return;
    }
    if (l->ntrace == DLK_TRACE_BUCKETS) {
        for (size_t i = 0; i < DLK_TRACE_BUCKETS / 2; i++) {
            l->trace[i] = l->trace[2 * i];
            merge(&l->trace[i], &l->trace[2 * i + 1]);
        }
        l->ntrace = DLK_TRACE_BUCKETS / 2;
        l->trace_per *= 2;
    }
    l->trace[l->ntrace++] = *b;
}

void Dlk_trace_enter(dlk_loader *l, double now)
{
    if (l->ntrace)
        l->trace[l->ntrace - 1].t1 = now;
    l->cur_wait = 0;
    memset(l->cur_late, 0, sizeof l->cur_late);
}

void Dlk_trace_batch(dlk_loader *l, double t_in, double t_out,
                     uint32_t samples)
{
    dlk_trace_bucket b;
    memset(&b, 0, sizeof b);
    b.first_batch = l->trace_batches++;
    b.batches = 1;
    b.samples = samples;
    b.epoch = b.last_epoch = l->st.epoch;
    b.t0 = t_in;
    b.t1 = t_out;
    b.next_s = t_out - t_in;
    b.wait_s = l->cur_wait;
    memcpy(b.late_s, l->cur_late, sizeof b.late_s);
    b.buffer_bytes = l->cur_resident;
    add(l, &b);
}

size_t dlk_loader_trace(const dlk_loader *l, dlk_trace_bucket *out,
                        size_t cap)
{
    size_t n = l->ntrace < cap ? l->ntrace : cap;
    if (n)
        memcpy(out, l->trace, n * sizeof *out);
    return l->ntrace;
}
