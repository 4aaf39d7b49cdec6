/* png_jump.h - libpng's errors for the PNG reader and writer: a job
 * struct whose first member is a Dlk_png_jump, passed as libpng's error
 * pointer, gets the message and a longjmp back to its setjmp; warnings
 * are dropped (the reader treats what matters, a bad CRC or a truncated
 * stream, as errors). */
#ifndef DLK_PNG_JUMP_H
#define DLK_PNG_JUMP_H

#include <png.h>
#include <setjmp.h>

typedef struct Dlk_png_jump {
    jmp_buf jb;
    char msg[256];
} Dlk_png_jump;

void Dlk_png_on_error(png_structp png, png_const_charp msg);
void Dlk_png_on_warning(png_structp png, png_const_charp msg);

#endif
