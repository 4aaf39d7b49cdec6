/*
 * internal.h - every internal header of libdlk at once, for a file that
 * wants them all; a file that uses a few includes those instead.
 */
#ifndef DLK_INTERNAL_H
#define DLK_INTERNAL_H

#include "dlk.h"
#include "dlk_bench.h"

#include "util/attr.h"
#include "util/error.h"
#include "util/abi.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/size.h"
#include "util/buf.h"
#include "util/bytes.h"
#include "util/clock.h"
#include "util/hash.h"
#include "util/keys.h"
#include "util/text.h"
#include "store/store.h"
#include "format/chunk.h"
#include "format/manifest.h"
#include "format/docs.h"
#include "format/json.h"

#endif /* DLK_INTERNAL_H */
