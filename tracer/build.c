/*
 * build.c — a trace from a classified recording: its in-step allocations planned into a pool
 * region and relocated there, its elementwise chains fused (mode default), pinned staging for
 * its host-to-device copies, its segments captured into graphs. A failure leaves the anchor
 * without the variant (blacklisted if it has none), with the reason.
 */
#include "tracer/tracer.h"
#include "graphs/graph.h"
#include "fusion/fusion.h"
#include "allocator/hostmem.h"
#include "allocator/plan.h"
#include "allocator/pointers.h"
#include "allocator/pool.h"
#include "base/driver.h"
#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
#include "base/nvtx.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* CGJIT_DUMP_ALLOCS: the trace's allocation events, in the format cgjit-plan reads. */
static void dump_allocs(const cgj_anchor_t *a, const cgj_plan_block_t *pb, size_t n)
{
    char dir[768], path[1024];
    cgj_file_expand(cgj_cfg.DUMP_ALLOCS, dir, sizeof dir); /* %p: the pid */
    snprintf(path, sizeof path, "%s/%s-v%u.txt", dir, a->name, a->nvariants + 1);
    /* A name is any bytes: in the file's name only letters, digits, '.', '-' and '_' stay. */
    for (char *p = path + strlen(dir) + 1; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '-' || *p == '_'))
            *p = '_';
    cgj_file_mkdir(dir);
    FILE *f = cgj_file_open(path, true);
    if (!f) {
        cgj_log_message("warning: CGJIT_DUMP_ALLOCS: cannot write %s: %s", path, cgj_file_strerror(errno));
        return;
    }
    fputs("# cgjit allocation trace of anchor '", f);
    cgj_text_str(f, a->name); /* on its line: a newline in the name must not make a line cgjit-plan reads */
    fprintf(f, "', variant %u\n", a->nvariants + 1);
    cgj_plan_write(f, pb, n);
    fclose(f);
}

/* Is all of the trace's GPU work on one stream? Then it runs in the program's order (graphs and
 * calls issued as made alike), and a block's memory may serve a later block once it is freed. On
 * several streams, work that ran as made on one stream is not ordered before a graph launched
 * on another: where the program's free would have waited for it (cuMemFree), the pool's reuse
 * would not. */
static bool one_stream(const cgj_oplist_t *l)
{
    const cgj_op_t *first = NULL;
    for (uint32_t i = 0; i < l->n; i++) {
        const cgj_op_t *o = &l->ops[i];
        if (cgj_op_class[o->call.kind] != CGJ_CLASS_CAPTURE) continue;
        if (!first) first = o;
        else if (o->call.stream != first->call.stream) return false;
    }
    return true;
}

/* Plan the in-step allocations of tr into one pool region and relocate the trace there. */
static bool plan_memory(const cgj_anchor_t *a, cgj_trace_t *tr, cgj_reason_t *why)
{
    cgj_blocks_t bl = cgj_blocks_of(&tr->list);
    tr->nblocks = bl.n;
    if (!bl.n) {
        cgj_blocks_free(&bl);
        return true;
    }
    /* Blocks share memory only where the step's work is in one order (one_stream); else each
     * is planned as live over the whole step (an escaping block's lifetime). */
    bool share = one_stream(&tr->list);
    cgj_plan_block_t *pb = cgj_xcalloc(bl.n, sizeof *pb);
    for (uint32_t j = 0; j < bl.n; j++)
        pb[j] = (cgj_plan_block_t){.size = cgj_plan_size_class(bl.b[j].bytes),
                                   .start = bl.b[j].start,
                                   .end = bl.b[j].escapes || !share ? CGJ_PLAN_ESCAPES : bl.b[j].end};
    cgj_plan_result_t res;
    cgj_plan(pb, bl.n, &res);
    if (cgj_cfg.DUMP_ALLOCS[0]) dump_allocs(a, pb, bl.n);
    cgj_anchor_make_room(a, res.pool_bytes);
    bool ok = cgj_pool_region(res.pool_bytes, &tr->region, why->detail, sizeof why->detail);
    if (!ok) why->code = CGJ_REASON_BUILD_POOL;
    if (ok) {
        CUdeviceptr *planned = cgj_xcalloc(bl.n, sizeof *planned);
        tr->allocs = cgj_xcalloc(bl.n, sizeof *tr->allocs);
        for (uint32_t j = 0; j < bl.n; j++) planned[j] = tr->region + pb[j].offset, tr->allocs[j] = bl.b[j].start;
        cgj_shape_relocate(&tr->list, planned);
        cgj_free(planned);
        tr->pool_bytes = res.pool_bytes, tr->naive_bytes = res.naive_bytes;
        tr->lower_bound = res.lower_bound;
        CGJ_LOG(trace, "anchor '%s': %u allocations planned into %llu bytes (naive %llu, lower bound %llu, %s)",
                a->name, bl.n, (unsigned long long)res.pool_bytes, (unsigned long long)res.naive_bytes,
                (unsigned long long)res.lower_bound, res.heuristic);
    }
    cgj_free(pb), cgj_blocks_free(&bl);
    return ok;
}

/* Pinned staging for every host-to-device copy a graph holds: replay copies the program's bytes
 * there. A copy in a segment too short for a graph runs as the program makes it and needs none:
 * pinning a buffer the size of a program's 256 MB set-up copy would cost it tens of
 * milliseconds for nothing. */
static bool stage_copies(cgj_trace_t *t, cgj_reason_t *why)
{
    for (uint32_t i = 0; i < t->list.n; i++) {
        cgj_op_t *o = &t->list.ops[i];
        if (!cgj_call_staged(&o->call) || (o->seg < t->nsegs && t->segs[o->seg].eager)) continue;
        o->stage = cgj_staging_alloc(o->call.u.m.bytes);
        o->stage_cap = o->call.u.m.bytes;
        if (!o->stage) {
            cgj_reason_set(why, CGJ_REASON_BUILD_STAGING, i, "%zu bytes", o->call.u.m.bytes);
            return false;
        }
    }
    return true;
}

/* Could v be a pointer? Device and host addresses are at least a page in and below 2^57;
 * smaller values (counts, sizes, scalars' bit patterns) are never asked of the driver. */
static bool may_point(uint64_t v)
{
    return v >= 4096 && v < (1ull << 57) && !(v & 3);
}

/* Mark the kernels that reach mapped pinned host memory: any 8-byte word of their recorded
 * arguments (a pointer argument, or one inside a struct argument) that points there. Such a
 * kernel may write what the host reads with no CUDA call in between (a completion flag the host
 * spins on, zero-copy output): its chunk is launched as soon as it is absorbed. Managed memory
 * is left out: a program that uses it for everything would lose its graphs, and the host must
 * synchronize before it reads what a kernel wrote there (only system-scope atomics may not). */
static void mark_host_visible(cgj_oplist_t *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        cgj_op_t *o = &l->ops[i];
        if (o->call.kind != CGJ_OP_KERNEL || !o->kp) continue;
        for (uint32_t at = 0; at + 8 <= o->kp->size && !o->host_visible; at += 8) {
            uint64_t v;
            memcpy(&v, o->kp->rec + at, sizeof v);
            o->host_visible = may_point(v) && cgj_pointer_kind((CUdeviceptr)v) == CGJ_MEM_PINNED;
        }
    }
}

/* Are a and b the same call of a step as far as where chunks end goes: the same kind, the same
 * kernel, the same library call's group? */
static bool same_place(const cgj_op_t *a, const cgj_op_t *b)
{
    if (a->call.kind != b->call.kind || !a->lib != !b->lib || (a->lib && a->lib->nops != b->lib->nops)) return false;
    return a->call.kind != CGJ_OP_KERNEL || a->call.u.k.f == b->call.u.k.f;
}

/* Chunks end where the recorded host time between calls adds up (graphs/graph.c), and two
 * recordings of one anchor rarely saw the same gaps. A run that leaves one variant for another
 * can only switch where both have a segment beginning at the pending work's first op: the new
 * variant takes the gaps of the variant it shares the longest prefix with, up to the call where
 * they part, so that their chunks end at the same ops there. */
static void align_chunks(const cgj_anchor_t *a, cgj_trace_t *tr)
{
    const cgj_trace_t *best = NULL;
    uint32_t best_n = 0;
    for (uint32_t k = 0; k < a->nvariants; k++) {
        const cgj_trace_t *u = a->variants[k];
        uint32_t n = 0;
        while (n < tr->list.n && n < u->list.n && same_place(&tr->list.ops[n], &u->list.ops[n])) n++;
        if (n > best_n) best = u, best_n = n;
    }
    if (!best) return;
    uint32_t end = best_n < tr->list.n && best_n < best->list.n ? best_n + 1 : best_n; /* the gap before they part */
    for (uint32_t i = 0; i < end; i++) tr->list.ops[i].gap_ns = best->list.ops[i].gap_ns;
}

void cgj_build_prepare(cgj_oplist_t *rec)
{
    uint64_t gen = cgj_pointer_host_generation(); /* what the graphs' host operands are valid in */
    for (uint32_t i = 0; i < rec->n; i++) rec->ops[i].host_gen = gen;
}

/* Which kernels reach mapped host memory, asked of the driver as the build starts (on cgjit's
 * builder thread, off the program's: one query per argument word that may point, where no
 * cached range answers). The answers are the run's own unless page-locked host memory was
 * freed or unregistered since it ended (memory page-locked since only marks more kernels, which
 * costs launches, never results): then a build there gives up, and the step is built again
 * where it is recorded. */
static bool mark_host(cgj_trace_t *tr, bool background, cgj_reason_t *why)
{
    mark_host_visible(&tr->list);
    if (!background || !tr->list.n || cgj_pointer_host_generation() == tr->list.ops[0].host_gen) return true;
    cgj_reason_set(why, CGJ_REASON_BUILD_HOST_CHANGED, CGJ_REASON_NO_OP, NULL);
    return false;
}

bool cgj_build_variant(cgj_anchor_t *a, cgj_oplist_t *rec, bool background)
{
    a->want_twin = false; /* an escape exit's wish for a twin is answered by this build, made or not */
    cgj_trace_t *tr = cgj_xcalloc(1, sizeof *tr);
    tr->list = *rec;
    *rec = (cgj_oplist_t){0};
    for (uint32_t i = 0; i < tr->list.n; i++) {
        const cgj_kparams_t *kp = tr->list.ops[i].kp;
        if (kp) tr->kernels++, tr->varying_slots += kp->nvarying;
    }
    cgj_reason_t why = {.code = CGJ_REASON_NONE, .op = CGJ_REASON_NO_OP};
    if (cgj_drv.r_cuCtxGetCurrent) cgj_drv.r_cuCtxGetCurrent(&tr->ctx);
    cgj_nvtx_push(CGJ_NVTX_BUILD, a->name, a->nvariants);
    uint64_t t0 = cgj_now_ns();
    bool ok = mark_host(tr, background, &why) && plan_memory(a, tr, &why);
    uint64_t t1 = cgj_now_ns();
    cgj_fusion_stats_t fs = {0};
    if (ok) cgj_fusion_pass(tr, a->name, &fs);
    CGJ_STAT_ADD(fusions, fs.chains);
    CGJ_STAT_ADD(ops_fused, fs.ops);
    CGJ_STAT_ADD(fusions_dropped, fs.dropped);
    if (ok) align_chunks(a, tr), cgj_graph_segments(tr);
    ok = ok && stage_copies(tr, &why) && cgj_graph_build(tr, &why);
    tr->plan_ns = t1 - t0;
    tr->build_ns = cgj_now_ns() - t1;
    cgj_nvtx_pop();
    if (!ok) {
        CGJ_STAT_ADD(build_failures, 1);
        cgj_anchor_trace_free(tr);
        if (why.code == CGJ_REASON_BUILD_POOL) { /* memory may come back: try again later */
            uint32_t shift = a->pool_failures < 8 ? a->pool_failures : 8;
            a->pool_failures++;
            a->pool_retry_at = __atomic_load_n(&a->runs, __ATOMIC_RELAXED) + (16ull << shift);
            cgj_anchor_note(a, &why);
        } else if (!a->nvariants && !background) {
            cgj_anchor_blacklist(a, &why);
        } else {
            cgj_anchor_note(a, &why);
        }
        return false;
    }
    cgj_anchor_publish(a, tr);
    if (fs.queued && __atomic_load_n(&a->refusions, __ATOMIC_RELAXED) < 2) /* built again once compiled */
        __atomic_store_n(&a->fuse_ticket, fs.ticket, __ATOMIC_RELAXED);
    CGJ_STAT_ADD(traces_built, 1);
    CGJ_LOG(trace, "anchor '%s': variant %u built: %u ops, %u kernels, %u segment(s), %u varying slot(s)", a->name,
            a->nvariants, tr->list.n, tr->kernels, tr->nsegs, tr->varying_slots);
    for (uint32_t i = 0; i < tr->list.n && (cgj_log_mask & (1u << CGJ_LOG_trace)); i++) {
        char desc[160];
        const cgj_op_t *o = &tr->list.ops[i];
        CGJ_LOG(trace, "  op %u: %s%s%s", i, cgj_op_describe(o, desc, sizeof desc),
                cgj_op_class[o->call.kind] == CGJ_CLASS_BOUNDARY ? " (ends a segment)" : "",
                o->kp && o->kp->nvarying ? " (varying parameters)" : "");
    }
    return true;
}

bool cgj_build_may_try(const cgj_anchor_t *a)
{
    return !cgj_program_capturing() && __atomic_load_n(&a->runs, __ATOMIC_RELAXED) >= a->pool_retry_at;
}

uint32_t cgj_build_max_variants(void)
{
    long m = cgj_cfg.MAX_VARIANTS;
    return m > CGJ_MAX_VARIANTS_HARD ? CGJ_MAX_VARIANTS_HARD : (uint32_t)m;
}

/* Same shape and same varying slots as an existing variant: building it would add nothing. */
bool cgj_build_duplicates(const cgj_anchor_t *a, const cgj_oplist_t *rec)
{
    cgj_reason_t why;
    for (uint32_t k = 0; k < a->nvariants; k++) {
        const cgj_oplist_t *v = &a->variants[k]->list;
        if (!cgj_shape_same(v, rec, &why)) continue;
        bool same = true;
        for (uint32_t i = 0; i < v->n && same; i++)
            if (v->ops[i].kp) same = !memcmp(v->ops[i].kp->varying, rec->ops[i].kp->varying, v->ops[i].kp->n);
        if (same) return true;
    }
    return false;
}
