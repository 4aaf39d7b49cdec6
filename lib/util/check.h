/*
 * check.h - internal invariants: DLK_ASSERT; not installed.
 */
#ifndef DLK_UTIL_CHECK_H
#define DLK_UTIL_CHECK_H

/* DLK_ASSERT(cond): a condition the code relies on and that no input can
 * break.  Checked in test and sanitizer builds (DLK_CHECKS: make SAN=...
 * or CHECKS=1), where a broken one aborts naming the place; compiled out
 * of release builds (the condition is still type-checked, not run). */
#ifdef DLK_CHECKS
void Dlk_assert_fail(const char *cond, const char *file, int line)
    __attribute__((noreturn));
#define DLK_ASSERT(cond) \
    ((cond) ? (void)0 : Dlk_assert_fail(#cond, __FILE__, __LINE__))
#else
#define DLK_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif /* DLK_UTIL_CHECK_H */
