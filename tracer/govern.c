/*
 * govern.c — the governor: is the whole process faster with cgjit active than without it?
 *
 * The cost model (cost.c) judges each anchor by its own periods. Time cgjit costs outside them
 * (recordings and side exits of anchors that never pay, waits on other threads, the
 * interposition itself) it cannot see. The governor judges the process as the program sees it:
 * by the pace of its *heartbeat*, the call that begins its most frequent step.
 *
 * How. While *learning*, every step's begin is counted by the call that began it (its driver
 * function, stream and kernel; for a marked step, its name; a step cgjit found is counted at the
 * thread's next begin, and only where it held HEART_CALLS calls: a model's parameters uploaded one
 * by one begin as many one-call steps under sync, and are no loop; after SHORT_STEPS of them, a
 * program whose loop is made of such steps, they count too); after LEARN_BEGINS begins the most
 * frequent becomes the heartbeat (after LEARN_ALONE where one marked step made them all), and its
 * calls are counted from then on wherever they are made (runtime/wrappers.c's CGJ_GOV_BEAT: one
 * load and one compare per call). Once SETTLE_BEATS beats in a row saw no trace built (cgjit's
 * warm-up is no measure of either state; SETTLE_MAX at most) the governor *measures*: it alternates
 * windows in which cgjit is *active* (steps found, recorded, replayed and probed as ever) and
 * *dormant* (every call straight through: nothing recorded, no cycle detection, no step begun;
 * graphs, pools and traces kept, so an active window after a dormant one rebuilds nothing). A
 * window closes at a beat once it holds WIN_BEATS beats and WIN_MIN_NS; its pace is its time per
 * beat. A window whose halves (by time) hold its beats very unevenly met a change of the program's
 * own pace (its start-up ending, a pause) and is measured again, once. Windows come in pairs,
 * ordered A D, D A, A D ... so that a drifting pace cancels; each pair gives d = ln(dormant pace /
 * active pace), positive where cgjit makes the program faster. After MIN_PAIRS pairs a one-sided
 * t-test decides: active where the mean of d is above 0 with 95% confidence (and the median agrees:
 * one pair that met a phase of the program must not decide alone), dormant where it is below 0 with
 * 80% confidence (and the median agrees). The burden of proof lies on active: a dormant decision
 * that was wrong forgoes a gain until the next check, an active one that was wrong makes the
 * program slower, and every pair measured meanwhile spends half its time in the state that is
 * losing. Where the 95% interval lies inside +/- EQUIV_PCT (no difference worth a measurement) the
 * mean decides, and once MAX_PAIRS are in the median does, so the process is never kept in a state
 * measured slower. The decision then *holds* for HOLD_FACTOR times the beats the measurement took
 * (doubling after each re-check that confirms it), and is checked again.
 *
 * Phases. A program that moves on (prefill then decode, training then evaluation) has a new
 * heartbeat: while active, PHASE_OTHERS begins of other steps in a row with no beat, and while
 * dormant, no beat for PHASE_QUIET_PERIODS of its periods (asked at synchronizations), start a
 * new judgement from learning, active. So does a program's first marker (cgj_gov_markers): the
 * steps cgjit found itself begin no more, and the heartbeat is learned among the marked ones.
 *
 * A program of one marked step (judged_by_anchor): where one marked step made every begin, cgjit
 * finds no step itself and the anchors' cost model is on, the state is ANCHOR, with no window:
 * that step's eager probes against its replays (cost.c) judge the process. A second step's begin
 * ends it, and learning starts again.
 *
 * Switching is a flag (cgj_gov_dormant) and implicit stepping's share of the fast-path count
 * (implicit.c, cgj_implicit_hold). A thread in a step finishes it as it began; a step only
 * *begins* active or dormant, so no step is ever cut. Every switch bumps cgj_gov_epoch: the cost
 * model pairs no period across one.
 *
 * Threads: beats and begins come from any thread; the state is under one mutex (beats are at
 * most one per step). The hot path reads cgj_gov_api and cgj_gov_dormant with relaxed loads.
 */
#include "tracer/tracer.h"
#include "base/log.h"
#include "base/nvtx.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LEARN_BEGINS 32        /* step begins counted before the heartbeat is chosen ... */
#define LEARN_ALONE 8          /* ... or this many, where one marked step made them all */
#define NCAND 16               /* candidate heartbeats kept while learning */
#define HEART_CALLS 2          /* calls a step found by cgjit holds at least to be counted ... */
#define SHORT_STEPS 1024       /* ... until this many shorter ones came first (a loop of them) */
#define SETTLE_BEATS 4         /* beats in a row with no trace built before the first window ... */
#define SETTLE_MAX 64          /* ... or this many beats after the choice, whichever comes first */
#define WIN_BEATS 6            /* a window holds at least this many beats ... */
#define WIN_MIN_NS 20000000ull /* ... and at least 20 ms */
#define WIN_TIMES 1024         /* beat times a window keeps, for the check of its halves */
#define PACE_JUMP 4            /* a window whose halves (by time) hold beats in more than this ratio ... */
#define PACE_JUMP_BEATS 18     /* ... and that holds at least this many beats is measured again, once */
#define MIN_PAIRS 2
#define MAX_PAIRS 8
#define EQUIV_PCT 1                     /* an interval inside +/- this is no difference worth measuring on */
#define HOLD_FACTOR 16                  /* a decision holds this many times the beats its measurement took */
#define PHASE_OTHERS 512                /* other steps begun in a row with no beat: a new phase */
#define PHASE_QUIET_PERIODS 32          /* dormant: no beat for this many periods: a new phase ... */
#define PHASE_QUIET_MIN_NS 200000000ull /* ... and at least 200 ms */

const char *cgj_gov_api;
int cgj_gov_dormant;
uint32_t cgj_gov_epoch;

/* The key of a marked step's begin (cgj_trace_begin): its name's hash is the heartbeat's key. */
static const char marked_api[] = "cgj_trace_begin";

typedef struct {
    const char *api;
    const void *stream, *f;
    uint64_t count;
    char name[160];
} cand_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Dormant, the heartbeat has stopped once there was no beat until quiet_at (beat() sets it,
 * 0: not watched); read without the lock by cgj_gov_tick. */
static uint64_t quiet_at;
static struct {
    bool on;
    cgj_govern_state_t st;
    cand_t cand[NCAND];
    uint32_t ncand;
    uint64_t begins;
    uint32_t learn_gen;               /* learnings begun (a thread's previous step counts in its own) */
    uint32_t short_steps;             /* steps of fewer than HEART_CALLS calls in this learning */
    cand_t beat;                      /* the heartbeat (api NULL: none) */
    uint64_t settle, settled;         /* beats since the choice; of them, in a row with no trace built */
    uint64_t built;                   /* traces built by the last beat (cgj_stats) */
    uint64_t last_beat_ns, period_ns; /* the last beat, and a running estimate of the period */
    uint64_t others;                  /* other steps begun since the last beat */
    /* measurement */
    uint64_t win_t0, win_beats;
    bool win_again;                /* this window was measured again already */
    bool pair_again;               /* this pair was started again already */
    uint64_t win_times[WIN_TIMES]; /* its beats' times (the first WIN_TIMES) */
    uint32_t pair, win_in_pair;
    double pace[2]; /* this pair's paces: [0] active, [1] dormant */
    double d[MAX_PAIRS];
    uint32_t npairs;
    uint64_t measure_beats;
    /* decision */
    bool decided_dormant, decided;
    uint64_t hold_left, hold_len;
    /* figures */
    cgj_govern_info_t info;
    uint64_t dormant_since_ns; /* dormant now: since when */
} g;

/* One-sided 95% and 80% critical values of Student's t, by degrees of freedom (1 ...). */
static double t95(uint32_t df)
{
    static const double t[] = {6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796};
    return df == 0 ? 1e9 : df <= sizeof t / sizeof *t ? t[df - 1] : 1.782;
}

static double t80(uint32_t df)
{
    static const double t[] = {1.376, 1.061, 0.978, 0.941, 0.920, 0.906, 0.896, 0.889, 0.883, 0.879, 0.876};
    return df == 0 ? 1e9 : df <= sizeof t / sizeof *t ? t[df - 1] : 0.873;
}

static void set_state(cgj_govern_state_t st)
{
    g.st = st;
    __atomic_store_n(&g.info.state, (int32_t)st, __ATOMIC_RELAXED);
}

/* Active or dormant from now on (under the lock). */
static void set_dormant(bool dormant, uint64_t now)
{
    if (__atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED) == (int)dormant) return;
    if (dormant) g.dormant_since_ns = now;
    else if (g.dormant_since_ns) g.info.dormant_ns += now - g.dormant_since_ns, g.dormant_since_ns = 0;
    __atomic_store_n(&cgj_gov_dormant, dormant, __ATOMIC_RELAXED);
    __atomic_fetch_add(&cgj_gov_epoch, 1, __ATOMIC_RELAXED);
    cgj_implicit_hold(dormant);
    g.info.switches++;
    cgj_nvtx_mark(CGJ_NVTX_GOVERN, dormant ? "dormant" : "active", (int64_t)g.info.switches);
    CGJ_LOG(govern, "%s", dormant ? "dormant: every call goes straight through" : "active");
}

/* A new judgement: learning the heartbeat, active. */
static void learn(uint64_t now, const char *why)
{
    if (g.beat.api) CGJ_LOG(govern, "the heartbeat '%s' %s: a new phase, learning its heartbeat", g.beat.name, why);
    set_dormant(false, now);
    __atomic_store_n(&cgj_gov_api, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&quiet_at, 0, __ATOMIC_RELAXED);
    memset(&g.beat, 0, sizeof g.beat);
    g.ncand = 0;
    g.begins = 0;
    g.learn_gen++;
    g.short_steps = 0;
    g.others = 0;
    g.decided = false;
    g.hold_len = 0;
    set_state(CGJ_GOVERN_LEARN);
}

static void start_window(uint64_t now)
{
    /* Pairs alternate A D, D A, ...: the first window of pair p is dormant where p is odd. */
    bool dormant = (g.pair % 2 == 1) == (g.win_in_pair == 0);
    set_dormant(dormant, now);
    g.win_t0 = now;
    g.win_beats = 0;
    g.win_again = false;
}

/* Did the program change its pace inside the window (its start-up ending, a pause): do the
 * window's two halves, by time, hold beats in more than PACE_JUMP times the other's number?
 * cgjit's state is the same throughout a window, so such a jump is the program's; a window that
 * holds it measures the moment, not the state, and is measured again (once: a heartbeat that
 * comes in bursts longer than a window could split unevenly every time). */
static bool paced_unevenly(uint64_t now)
{
    uint64_t n = g.win_beats;
    if (n < PACE_JUMP_BEATS || n > WIN_TIMES || g.win_again) return false;
    uint64_t mid = g.win_t0 + (now - g.win_t0) / 2, first = 0;
    for (uint64_t i = 0; i < n; i++) first += g.win_times[i] < mid;
    uint64_t second = n - first, lo = first < second ? first : second, hi = n - lo;
    return hi > PACE_JUMP * (lo ? lo : 1);
}

static void start_measure(uint64_t now)
{
    g.pair = g.win_in_pair = 0;
    g.pair_again = false;
    g.npairs = 0;
    g.measure_beats = 0;
    set_state(CGJ_GOVERN_MEASURE);
    start_window(now);
}

/* The mean of the pairs' d and its standard error (1e9 from one pair: no spread to judge by). */
static void stats(double *mean, double *se)
{
    double s = 0, ss = 0;
    for (uint32_t i = 0; i < g.npairs; i++) s += g.d[i];
    double m = s / g.npairs;
    for (uint32_t i = 0; i < g.npairs; i++) ss += (g.d[i] - m) * (g.d[i] - m);
    double sd = g.npairs > 1 ? sqrt(ss / (g.npairs - 1)) : 0;
    *mean = m;
    *se = g.npairs > 1 ? sd / sqrt((double)g.npairs) : 1e9;
}

/* The median of the pairs' d: a pair that met a phase of the program (a sample taken every few
 * hundred steps, a late build) moves the mean, and must not decide alone. */
static double median_d(void)
{
    double v[MAX_PAIRS];
    uint32_t n = g.npairs;
    memcpy(v, g.d, n * sizeof *v);
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double x = v[j];
            v[j] = v[j - 1], v[j - 1] = x;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Decide where the pairs allow it; true when decided. */
static bool judge(uint64_t now)
{
    if (g.npairs < MIN_PAIRS) return false;
    double m, se, eq = log(1 + EQUIV_PCT / 100.0), med = median_d();
    stats(&m, &se);
    double h = t95(g.npairs - 1) * se, h_dormant = t80(g.npairs - 1) * se;
    bool sure = (m - h > 0 && med > 0) || (m + h_dormant < 0 && med < 0), equal = m - h > -eq && m + h < eq;
    if (!sure && !equal && g.npairs < MAX_PAIRS) return false;
    bool by_median = !sure && !equal, dormant = by_median ? med < 0 : m < 0;
    cgj_govern_info_t *in = &g.info;
    in->ratio = exp(by_median ? med : m); /* the figure that decided */
    in->lo = exp(m - h);
    in->hi = exp(m + h);
    in->pairs = g.npairs;
    in->judgements++;
    in->last_dormant = dormant;
    uint64_t len = HOLD_FACTOR * g.measure_beats;
    g.hold_len = g.decided && g.decided_dormant == dormant && g.hold_len ? g.hold_len * 2 : len;
    g.hold_left = g.hold_len;
    g.decided = true;
    g.decided_dormant = dormant;
    CGJ_LOG(
        govern,
        "judgement %llu on '%s': active/dormant speed %.3fx%s (95%% interval %.3f-%.3f) over %u pairs: %s for %llu beats",
        (unsigned long long)in->judgements, g.beat.name, in->ratio, by_median ? " (the pairs' median)" : "", in->lo,
        in->hi, g.npairs, dormant ? "dormant" : "active", (unsigned long long)g.hold_left);
    set_dormant(dormant, now);
    set_state(dormant ? CGJ_GOVERN_DORMANT : CGJ_GOVERN_ACTIVE);
    return true;
}

static void close_window(uint64_t now)
{
    bool dormant = __atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED);
    if (paced_unevenly(now)) {
        CGJ_LOG(govern, "window %llu (%s): %llu beats at an uneven pace (the program changed its own): measured again",
                (unsigned long long)g.info.windows + 1, dormant ? "dormant" : "active",
                (unsigned long long)g.win_beats);
        if (dormant) g.info.measure_dormant_ns += now - g.win_t0;
        /* The pair's first window was measured at the pace before the change: the pair starts
         * again (once), its first window in its own state. */
        if (g.win_in_pair == 1 && !g.pair_again) g.win_in_pair = 0, g.pair_again = true;
        start_window(now);
        g.win_again = true;
        return;
    }
    double pace = (double)(now - g.win_t0) / (double)g.win_beats;
    g.pace[dormant] = pace;
    g.info.windows++;
    if (dormant) g.info.measure_dormant_ns += now - g.win_t0;
    CGJ_LOG(govern, "window %llu (%s): %llu beats, %.1f us a beat", (unsigned long long)g.info.windows,
            dormant ? "dormant" : "active", (unsigned long long)g.win_beats, pace / 1e3);
    if (++g.win_in_pair == 2) {
        if (g.npairs < MAX_PAIRS) g.d[g.npairs++] = log(g.pace[1] / g.pace[0]);
        g.info.pairs_total++;
        g.win_in_pair = 0;
        g.pair_again = false;
        g.pair++;
        if (judge(now)) return;
    }
    start_window(now);
}

/* A beat at `now` (under the lock). */
static void beat(uint64_t now)
{
    if (g.last_beat_ns && now > g.last_beat_ns) {
        uint64_t p = now - g.last_beat_ns;
        g.period_ns = g.period_ns ? (g.period_ns * 7 + p) / 8 : p;
    }
    g.last_beat_ns = now;
    uint64_t quiet = g.period_ns * PHASE_QUIET_PERIODS;
    __atomic_store_n(&quiet_at, now + (quiet > PHASE_QUIET_MIN_NS ? quiet : PHASE_QUIET_MIN_NS), __ATOMIC_RELAXED);
    g.others = 0;
    g.info.beats++;
    switch (g.st) {
    case CGJ_GOVERN_SETTLE: { /* cgjit's warm-up (recordings and builds) is no measure of either state */
        uint64_t built = __atomic_load_n(&cgj_g_stats.traces_built, __ATOMIC_RELAXED);
        g.settled = built == g.built ? g.settled + 1 : 0;
        g.built = built;
        if (++g.settle >= SETTLE_MAX || g.settled >= SETTLE_BEATS) {
            if (g.settled >= SETTLE_BEATS)
                CGJ_LOG(govern, "measuring from beat %llu after the choice: no trace built for %d beats",
                        (unsigned long long)g.settle, SETTLE_BEATS);
            else
                CGJ_LOG(govern, "measuring from beat %llu after the choice: traces were still being built",
                        (unsigned long long)g.settle);
            start_measure(now);
        }
        break;
    }
    case CGJ_GOVERN_MEASURE:
        g.measure_beats++;
        if (g.win_beats < WIN_TIMES) g.win_times[g.win_beats] = now;
        if (++g.win_beats >= WIN_BEATS && now - g.win_t0 >= WIN_MIN_NS) close_window(now);
        break;
    case CGJ_GOVERN_ACTIVE:
    case CGJ_GOVERN_DORMANT:
        if (g.hold_left && --g.hold_left == 0) {
            CGJ_LOG(govern, "checking the decision again");
            start_measure(now);
        }
        break;
    default: break;
    }
}

static bool is_cand(const cand_t *c, const char *api, const void *stream, const void *f)
{
    return c->api == api && c->stream == stream && c->f == f;
}

void cgj_gov_seen(const char *api, const void *stream, const void *f)
{
    if (!g.on) return;
    pthread_mutex_lock(&lock);
    if (is_cand(&g.beat, api, stream, f)) beat(cgj_now_ns());
    pthread_mutex_unlock(&lock);
}

static uint64_t name_key(const char *name)
{
    return cgj_hash_bytes(name, strlen(name), 0x9e7) | 1;
}

/* A step's name into dst (a candidate's, size bytes), cut to fit: not snprintf, a step's begin
 * makes this copy while learning. */
static void copy_name(char *dst, size_t size, const char *name)
{
    size_t n = strnlen(name, size - 1);
    memcpy(dst, name, n);
    dst[n] = 0;
}

/* Is the heartbeat a marked step that made every begin, in a program whose steps cgjit finds
 * none of (markers in use: implicit stepping is off) and whose anchors' cost model is on? Then
 * cgjit does nothing outside that step but the fast path's test, which a dormant window keeps
 * too, and the step's period from one begin to the next is the program's pace: its anchor's eager
 * probes against its replays (cost.c) measure what windows would, at one step in 64 eager
 * instead of half the measuring, and turn replay off where it does not pay. A program of 40
 * marked steps would spend most of them measuring windows (learning, settling, two pairs of six
 * beats), half of those dormant. */
static bool judged_by_anchor(void)
{
    return g.ncand == 1 && g.beat.api == marked_api && cgj_cfg.COST &&
           __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) == CGJ_STEP_OFF;
}

/* Learning: count a begin by its call; the most frequent after LEARN_BEGINS is the heartbeat, and
 * a marked step that made every begin is after LEARN_ALONE (a training step marked with
 * cgjit.step counts one begin a step), so that a short program is judged before it ends. Steps
 * cgjit found itself wait for LEARN_BEGINS: a set-up that repeats one step (a layer initialized
 * after another, each synchronized) would else be chosen, and the loop after it judged only once
 * PHASE_OTHERS of its begins came with no beat. */
static void count_begin(const char *api, const void *stream, const void *f, const char *name)
{
    cand_t *c = NULL;
    for (uint32_t i = 0; i < g.ncand && !c; i++)
        if (is_cand(&g.cand[i], api, stream, f)) c = &g.cand[i];
    if (!c) {
        uint32_t k = g.ncand < NCAND ? g.ncand++ : 0;
        for (uint32_t i = 1; g.ncand == NCAND && i < NCAND; i++) /* full: the rarest goes */
            if (g.cand[i].count < g.cand[k].count) k = i;
        c = &g.cand[k];
        *c = (cand_t){.api = api, .stream = stream, .f = f};
        copy_name(c->name, sizeof c->name, name);
    }
    c->count++;
    if (++g.begins < LEARN_BEGINS && !(g.ncand == 1 && c->api == marked_api && g.begins >= LEARN_ALONE)) return;
    cand_t *best = &g.cand[0];
    for (uint32_t i = 1; i < g.ncand; i++)
        if (g.cand[i].count > best->count) best = &g.cand[i];
    g.beat = *best;
    g.settle = g.settled = 0;
    g.built = __atomic_load_n(&cgj_g_stats.traces_built, __ATOMIC_RELAXED);
    g.last_beat_ns = g.period_ns = 0;
    g.info.phases++;
    __atomic_store_n(&cgj_gov_api, g.beat.api, __ATOMIC_RELAXED);
    CGJ_LOG(govern, "heartbeat: '%s' (%llu of the last %llu step begins)", g.beat.name, (unsigned long long)best->count,
            (unsigned long long)g.begins);
    if (judged_by_anchor()) {
        set_state(CGJ_GOVERN_ANCHOR);
        CGJ_LOG(govern, "'%s' is the program's only step: its own cost model judges the process", g.beat.name);
    } else {
        set_state(CGJ_GOVERN_SETTLE);
    }
}

/* A step other than the heartbeat's begins, not learning (under the lock): PHASE_OTHERS of them
 * in a row end the phase, and learning starts again. True then. */
static bool other_begun(const char *api, const void *stream, const void *f)
{
    if (is_cand(&g.beat, api, stream, f)) return false;
    if (g.st == CGJ_GOVERN_ANCHOR) { /* no longer the only step: the process is judged by windows */
        learn(cgj_now_ns(), "is no longer the only step");
        return true;
    }
    if (++g.others < PHASE_OTHERS) return false;
    learn(cgj_now_ns(), "stopped while other steps ran");
    return true;
}

/* A step begins (under the lock): learning counts it; another step's begin may end a phase. */
static void begun(const char *api, const void *stream, const void *f, const char *name)
{
    if (g.st == CGJ_GOVERN_LEARN || other_begun(api, stream, f)) count_begin(api, stream, f, name);
}

/* The step this thread began last while learning, counted at the thread's next begin once its
 * length is known (gen: the learning it belongs to). */
static __thread struct {
    const char *api;
    const void *stream, *f;
    uint32_t gen;
    char name[160];
} prev;

void cgj_gov_begun(const cgj_call_t *c, const char *name, uint32_t calls)
{
    /* A query is no heartbeat: a host that polls makes as many as it waits, not as it works. */
    if (!g.on || c->kind == CGJ_OP_QUERY) {
        prev.api = NULL;
        return;
    }
    const void *f = c->kind == CGJ_OP_KERNEL ? (const void *)c->u.k.f : NULL;
    pthread_mutex_lock(&lock);
    /* A step of one call is no heartbeat (a model's parameters uploaded one by one, each
     * beginning a step of its own under sync): learning counts the thread's previous step here,
     * where its length is known, and only where it made a call after its first. */
    if (g.st != CGJ_GOVERN_LEARN) {
        other_begun(c->api, c->stream, f);
    } else if (calls >= HEART_CALLS || ++g.short_steps > SHORT_STEPS) { /* a loop of short steps counts */
        if (prev.api && prev.gen == g.learn_gen) count_begin(prev.api, prev.stream, prev.f, prev.name);
    }
    prev.api = NULL;
    if (g.st == CGJ_GOVERN_LEARN) {
        prev.api = c->api, prev.stream = c->stream, prev.f = f, prev.gen = g.learn_gen;
        copy_name(prev.name, sizeof prev.name, name);
    }
    pthread_mutex_unlock(&lock);
}

bool cgj_gov_marked(const char *name)
{
    if (!g.on) return __atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED); /* CGJIT_GOVERN=2: held */
    const void *key = (const void *)(uintptr_t)name_key(name);
    pthread_mutex_lock(&lock); /* counted while active, a beat in either state: one lock for both */
    if (!__atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED)) begun(marked_api, NULL, key, name);
    if (is_cand(&g.beat, marked_api, NULL, key)) beat(cgj_now_ns());
    pthread_mutex_unlock(&lock);
    if (__atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED)) cgj_gov_tick();
    return __atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED);
}

void cgj_gov_markers(void)
{
    if (!g.on) return;
    pthread_mutex_lock(&lock);
    if (g.st != CGJ_GOVERN_LEARN) {
        learn(cgj_now_ns(), "ended: the program marks its steps");
    } else { /* the steps counted so far begin no more */
        g.ncand = 0;
        g.begins = 0;
        g.learn_gen++;
        g.short_steps = 0;
    }
    pthread_mutex_unlock(&lock);
}

void cgj_gov_tick(void)
{
    if (!g.on) return;
    uint64_t now = cgj_now_ns(), at = __atomic_load_n(&quiet_at, __ATOMIC_RELAXED);
    if (!at || now <= at) return;
    pthread_mutex_lock(&lock);
    if (__atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED) && quiet_at && now > quiet_at)
        learn(now, "stopped beating");
    pthread_mutex_unlock(&lock);
}

void cgj_gov_init(void)
{
    int mode = (int)cgj_cfg.GOVERN;
    if (cgj_cfg.VERIFY) mode = 0; /* every replay is to be checked: none is to be skipped */
    pthread_mutex_lock(&lock);
    memset(&g, 0, sizeof g);
    g.on = mode == 1;
    set_state(mode == 1 ? CGJ_GOVERN_LEARN : mode == 2 ? CGJ_GOVERN_HELD : CGJ_GOVERN_OFF);
    pthread_mutex_unlock(&lock);
    if (mode == 2) {
        g.dormant_since_ns = cgj_now_ns();
        __atomic_store_n(&cgj_gov_dormant, 1, __ATOMIC_RELAXED);
        cgj_implicit_hold(true);
        CGJ_LOG(govern, "CGJIT_GOVERN=2: dormant for the whole run");
        cgj_nvtx_mark(CGJ_NVTX_GOVERN, "dormant", 0);
    }
}

void cgj_gov_forked(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&lock, &fresh, sizeof lock);
    __atomic_store_n(&cgj_gov_api, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&cgj_gov_dormant, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&quiet_at, 0, __ATOMIC_RELAXED);
    bool on = g.on;
    uint32_t gen = g.learn_gen;
    memset(&g, 0, sizeof g);
    g.on = on;
    g.learn_gen = gen + 1; /* the parent's threads' previous steps count no more */
    set_state(on ? CGJ_GOVERN_LEARN : CGJ_GOVERN_OFF);
}

void cgj_gov_get(cgj_govern_info_t *out)
{
    uint64_t size = out->size;
    pthread_mutex_lock(&lock);
    *out = g.info;
    out->size = size;
    out->state = g.st;
    out->dormant = __atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED);
    if (g.dormant_since_ns) out->dormant_ns += cgj_now_ns() - g.dormant_since_ns;
    /* The heartbeat of this phase, and a judgement in progress. */
    if (g.beat.api) snprintf(out->heartbeat, sizeof out->heartbeat, "%s", g.beat.name);
    if (g.st == CGJ_GOVERN_MEASURE && g.npairs) {
        double m, h;
        stats(&m, &h);
        out->cur_pairs = g.npairs;
        out->cur_ratio = exp(m);
    }
    pthread_mutex_unlock(&lock);
}
