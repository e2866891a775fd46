/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>

/*
 * One cleanup discipline for the whole tree: every owned resource is declared
 * with _cleanup_(free_func) and handed on with TAKE_PTR(). A function that
 * returns early never leaks and never double-frees.
 */
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_ __attribute__((unused))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define TAKE_PTR(p)                           \
        ({                                    \
                __typeof__(p) _ptr_ = (p);    \
                (p) = NULL;                   \
                _ptr_;                        \
        })

/* type cannot be parenthesized in a declaration. */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)        \
        static inline void func##p(type *p) {          \
                if (*p)                                \
                        func(*p);                      \
        }
/* NOLINTEND(bugprone-macro-parentheses) */

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void closep(int *fd) {
        if (*fd >= 0)
                close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Compare two byte strings in constant time. Lengths are public. */
static inline int memeq_const(const void *a, const void *b, size_t n) {
        const volatile unsigned char *x = a, *y = b;
        unsigned char d = 0;
        for (size_t i = 0; i < n; i++)
                d |= x[i] ^ y[i];
        return d == 0;
}
