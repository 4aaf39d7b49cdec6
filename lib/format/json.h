/*
 * json.h - the format's JSON documents as a reader loads them
 * (format/manifest.c); not installed.
 */
#ifndef DLK_FORMAT_JSON_H
#define DLK_FORMAT_JSON_H

#include "dlk.h"

#include <stddef.h>

/* Parse a JSON document of the format: at most DLK_JSON_MAX_BYTES, an
 * object with "format": "dlk" and "version": 1; `what` names it in
 * messages ("manifest").  Returns a new reference or NULL with err set. */
struct json_t;
struct json_t *Dlk_json_load(const char *json, size_t len, const char *name,
                             const char *what, dlk_error *err);

/* Maximum size of a JSON document a reader accepts.  Nesting is bounded
 * by jansson's parser (2048 levels), far below what would exhaust the
 * stack; the format itself nests at most 5 levels. */
#define DLK_JSON_MAX_BYTES ((size_t)256 << 20)

#endif /* DLK_FORMAT_JSON_H */
