/*
 * hash.h - hashing (util/hash.c): XXH3, seed 0; not installed.
 */
#ifndef DLK_UTIL_HASH_H
#define DLK_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

uint64_t Dlk_hash64(const void *p, size_t n);
/* A deterministic 64-bit mix (splitmix64's finalizer). */
uint64_t Dlk_mix64(uint64_t x);
/* XXH3-64 of a followed by b, as one stream. */
uint64_t Dlk_hash64_2(const void *a, size_t na, const void *b, size_t nb);
/* XXH3-128 of p as 32 lower-case hex digits plus NUL. */
void Dlk_hash128_hex(const void *p, size_t n, char out[33]);
/* The same of a followed by b. */
void Dlk_hash128_hex_2(const void *a, size_t na, const void *b, size_t nb,
                       char out[33]);
/* The same of n parts, as one stream. */
void Dlk_hash128_hex_v(const struct iovec *v, size_t n, char out[33]);
/* XXH3-64 fed in pieces: the same value as Dlk_hash64 of them joined. */
typedef struct Dlk_hash64_stream Dlk_hash64_stream;
Dlk_hash64_stream *Dlk_hash64_stream_new(void); /* NULL: out of memory */
void Dlk_hash64_stream_reset(Dlk_hash64_stream *h);
void Dlk_hash64_stream_update(Dlk_hash64_stream *h, const void *p, size_t n);
uint64_t Dlk_hash64_stream_digest(const Dlk_hash64_stream *h);
/* The XXH3-128 of the same bytes, as Dlk_hash128_hex gives it (XXH3's two
 * widths share their state and its updates; only the digest differs). */
void Dlk_hash64_stream_hex128(const Dlk_hash64_stream *h, char out[33]);
void Dlk_hash64_stream_free(Dlk_hash64_stream *h);
/* XXH3-64 of n >= 241 bytes computed block by block as a GPU does it
 * (util/xxh3_blocks.h): the same value as Dlk_hash64; keys from
 * Dlk_xxh3_keys_init.  The host's reference for the device's check. */
struct Dlk_xxh3_keys;
void Dlk_xxh3_keys_init(struct Dlk_xxh3_keys *k);
uint64_t Dlk_hash64_blocks(const void *p, size_t n,
                           const struct Dlk_xxh3_keys *k);

#endif /* DLK_UTIL_HASH_H */
