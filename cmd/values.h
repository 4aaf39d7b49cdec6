/* values.h - element values of any dtype, for printing. */
#ifndef DLK_CMD_VALUES_H
#define DLK_CMD_VALUES_H

#include "dlk.h"

#include <jansson.h>
#include <stdio.h>

typedef struct value {
    enum { V_UINT, V_INT, V_FLOAT, V_BOOL } kind;
    uint64_t u;
    int64_t i;
    double f;
} value;

/* Element i of little-endian data of dtype t. */
value value_at(dlk_dtype t, const void *data, size_t i);
void value_print(FILE *f, value v);
json_t *value_json(value v);

#endif
