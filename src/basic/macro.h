/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Small macros used everywhere: cleanup attributes and ownership transfer,
 * in the manner of systemd's src/basic. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _unused_ __attribute__((unused))
#define _noreturn_ __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
/* MIN/MAX: glibc's <sys/param.h> ones (libuv, OpenSSL pull it in too, and a
 * second definition would clash). */
#include <sys/param.h>

static inline void freep(void *p) {
        free(*(void **) p);
}

/* Close fd if it is valid and return -EBADF, for `fd = safe_close(fd);`
 * (systemd's shape). errno is preserved. */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -EBADF;
}

/* Close *fd if it is valid and reset it to -EBADF, so that a second call
 * (or a cleanup after an explicit closep) does nothing. errno is
 * preserved. */
static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}

/* Wipe n bytes at p, then free p (NULL ok). For every buffer that held a
 * plaintext secret. errno is preserved. */
static inline void *erase_and_free_n(void *p, size_t n) {
        if (p) {
                explicit_bzero(p, n);
                free(p);
        }
        return NULL;
}

/* Wipe a NUL-terminated string, then free it (NULL ok). */
static inline void *erase_and_free(char *s) {
        return erase_and_free_n(s, s ? strlen(s) : 0);
}
static inline void erase_and_freep(char **s) {
        *s = erase_and_free(*s);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_erase_free_ _cleanup_(erase_and_freep)

/* Take ownership of a pointer or fd out of a _cleanup_ variable. */
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _tp = (p);                                                           \
                (p) = NULL;                                                                        \
                _tp;                                                                               \
        })
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _tf = (fd);                                                                    \
                (fd) = -EBADF;                                                                     \
                _tf;                                                                               \
        })

/* Define a cleanup function for a type with a NULL-tolerant destructor. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
        static inline void func##p(type *p) {                                                      \
                if (*p)                                                                            \
                        func(*p);                                                                  \
        }

/* Retry a syscall on EINTR. */
#define RETRY_EINTR(expr)                                                                          \
        ({                                                                                         \
                __typeof__(expr) _r;                                                               \
                do                                                                                 \
                        _r = (expr);                                                               \
                while (_r < 0 && errno == EINTR);                                                  \
                _r;                                                                                \
        })

/* 1 in AddressSanitizer builds (gcc or clang): seccomp filters keep what
 * LeakSanitizer's leak check at exit needs (ptrace of the process's own
 * threads from a clone of it). */
#if defined(__SANITIZE_ADDRESS__)
#define WR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WR_ASAN 1
#endif
#endif
#ifndef WR_ASAN
#define WR_ASAN 0
#endif
