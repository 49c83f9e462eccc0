/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's process-lifetime arena: everything a command allocates for
 * its output and requests lives until cli_arena_free at exit. Depends on
 * nothing else in src/cli (cli-output.c and cli-util.c both use it). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void **arena;
static size_t arena_n, arena_cap;

static void arena_track(void *p) {
        if (arena_n == arena_cap) {
                size_t cap = arena_cap ? arena_cap * 2 : 64;
                void **a = realloc(arena, cap * sizeof(*a));
                if (!a)
                        abort();
                arena = a;
                arena_cap = cap;
        }
        arena[arena_n++] = p;
}

void *cli_alloc(size_t size) {
        void *p = calloc(1, size ? size : 1);
        if (!p)
                abort();
        arena_track(p);
        return p;
}

char *cli_strdup(const char *s) {
        size_t n = strlen(s) + 1;
        char *p = cli_alloc(n);
        memcpy(p, s, n);
        return p;
}

void cli_push(void ***arr, size_t *n, void *p) {
        /* Arena arrays only grow; reallocating means allocating anew. */
        void **a = cli_alloc((*n + 1) * sizeof(void *));
        if (*n)
                memcpy(a, *arr, *n * sizeof(void *));
        a[(*n)++] = p;
        *arr = a;
}

void cli_arena_free(void) {
        for (size_t i = 0; i < arena_n; i++)
                free(arena[i]);
        free(arena);
        arena = NULL;
        arena_n = arena_cap = 0;
}
