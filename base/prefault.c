/*
 * prefault.c — cgjit's own pages made present as it starts, not where the program first needs
 * them; see prefault.h.
 *
 * A path of cgjit's that a program takes for the first time (the first step begun at a kernel,
 * the first recording) runs code whose pages this process has not touched yet, and takes
 * metadata memory the arena has not touched yet: each such page is a page fault on the
 * program's thread, inside whatever the program is timing. On the lent GPU machines (virtual
 * machines) a process's first step begun at a kernel cost 40-50 us of host time outside the
 * driver that its later ones did not. Here, once: madvise(MADV_POPULATE_READ) maps every page of
 * libcgjit's code and read-only data (already in the page cache: nothing is read from disk),
 * and cgj_mem_reserve() has the metadata arena keep a block of present pages. Kernels before
 * 5.14 refuse MADV_POPULATE_READ; the code's pages are then left to fault as before.
 */
#define _GNU_SOURCE /* dl_iterate_phdr, dladdr */
#include "base/prefault.h"
#include "base/log.h"
#include "base/mem.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define RESERVE_BYTES (1u << 20) /* metadata pages kept present: about 200 new anchors' worth */

typedef struct {
    uintptr_t base; /* libcgjit's load address */
    size_t pages, refused;
} walk_t;

static int populate_own(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    walk_t *w = data;
    if ((uintptr_t)info->dlpi_addr != w->base) return 0;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W)) continue; /* code and read-only data */
        uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(pg - 1);
        uintptr_t hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + pg - 1) & ~(pg - 1);
        if (madvise((void *)lo, hi - lo, MADV_POPULATE_READ) == 0) w->pages += (hi - lo) / pg;
        else w->refused++;
    }
    return 1;
}

void cgj_prefault(void)
{
    Dl_info self;
    walk_t w = {0};
    if (dladdr((void *)cgj_prefault, &self) && self.dli_fbase) {
        w.base = (uintptr_t)self.dli_fbase;
        dl_iterate_phdr(populate_own, &w);
    }
    size_t kept = cgj_mem_reserve(RESERVE_BYTES);
    CGJ_LOG(interpose, "prefault: %zu pages of cgjit's code and read-only data made present%s; %zu KiB of metadata kept",
            w.pages, w.refused ? " (the kernel refused some: left to fault)" : "", kept >> 10);
}
