/*
 * mem.h — cgjit's own host memory for its metadata (trace records, parameter copies, tables).
 *
 * It comes from a jemalloc arena of cgjit's own (a private copy of jemalloc whose every symbol
 * is renamed, scripts/private-jemalloc.sh), never from the program's heap, so cgjit does not
 * change what a program does with its own memory. Built where jemalloc's PIC archive is missing,
 * it falls back to malloc. Exhaustion aborts (a broken invariant of the process, CGJ_ASSERT):
 * these functions never return NULL. Release with cgj_free, never free().
 */
#ifndef CGJ_MEM_H
#define CGJ_MEM_H

#include <stddef.h>

void *cgj_xmalloc(size_t n);
void *cgj_xcalloc(size_t count, size_t size);
void *cgj_xrealloc(void *p, size_t n);
void *cgj_xmemdup(const void *p, size_t n);
char *cgj_xstrdup(const char *s);
void cgj_free(void *p);
/* Where the metadata comes from: "jemalloc arenas" or "malloc". */
const char *cgj_mem_source(void);
/* The private jemalloc's arena flags for a new arena with `hooks` (an extent_hooks_t *, or NULL
 * for ordinary memory); false without jemalloc. allocator/hostmem.c makes its pinned arena so. */
int cgj_mem_new_arena(void *hooks, int *flags);

#endif /* CGJ_MEM_H */
