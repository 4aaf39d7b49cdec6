/*
 * attr.h - compiler attributes the library's declarations use; not installed.
 */
#ifndef DLK_UTIL_ATTR_H
#define DLK_UTIL_ATTR_H

#define DLK_UNUSED(x) ((void)(x))

#if defined(__GNUC__)
#define DLK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DLK_PRINTF(a, b)
#endif

#endif /* DLK_UTIL_ATTR_H */
