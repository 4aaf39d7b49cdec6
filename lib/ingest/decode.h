/* decode.h - the media decoders' interface lives in lib/media/decode.h;
 * this path includes it for the code that names it so
 * (lib/loader/baseline.c). */
#include "media/decode.h"
