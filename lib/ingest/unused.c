/* unused.c - which rows of a listing are samples of a schema, and which
 * objects feed no tensor: reported as not ingested, with the reason,
 * instead of becoming bad rows (a README.txt beside class folders is no
 * image without a label). */
#include "pipeline.h"

static void passed(void *ud, const char *key, const char *why)
{
    ing_source_unused(ud, key, why);
}

void ing_source_watch_passed(ing_source *s)
{
    s->store->passed = passed;
    s->store->passed_ud = s;
}

void ing_feeds_add(ing_feeds *f, const dlk_tensor_spec *s)
{
    f->media |= s->kind == DLK_KIND_IMAGE || s->kind == DLK_KIND_VIDEO;
    f->text |= s->kind == DLK_KIND_TEXT;
    f->label |= s->kind == DLK_KIND_CLASS_LABEL;
}

bool ing_row_is_sample(const ing_source *s, size_t row, const ing_feeds *f,
                       void (*report)(void *ud, const char *key,
                                      const char *why),
                       void *ud, uint64_t *unused)
{
    const ing_row *r = &s->rows[row];
    const ing_obj *o = &s->objs[r->first];
    bool media = false;
    for (uint32_t i = 0; i < r->n; i++)
        media |= o[i].role == ING_IMAGE || o[i].role == ING_VIDEO ||
                 o[i].role == ING_NPY; /* an array feeds its tensor itself */
    bool sample = media || !f->media;
    for (uint32_t i = 0; i < r->n; i++) {
        const char *why = NULL;
        if (!sample)
            why = "not a sample: no image or video has its stem";
        else if (o[i].role == ING_TXT && !f->text)
            why = "not used: the schema has no text tensor";
        else if (o[i].role == ING_CLS && !f->label)
            why = "not used: the schema has no class_label tensor";
        if (!why)
            continue;
        (*unused)++;
        if (report)
            report(ud, o[i].key, why);
    }
    return sample;
}
