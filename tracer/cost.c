/*
 * cost.c — does replay pay? Each anchor measures it and turns replay off where it does not.
 *
 * What counts is what the program sees: the time from one begin of the anchor's step to the
 * next (on the same thread), which holds the step's own work, its waits for the GPU, whatever
 * the program does between steps, and everything cgjit adds (guards, staging, patches, side
 * exits that re-issue a chunk and record the rest). Such periods are kept per kind of run:
 * replays, and *eager probes* — runs of an anchor that has a trace, run eagerly on purpose:
 * every PROBE_FIRST-th run while the first figures come in (or a verdict is pending) unless the
 * first EARLY_PAIRS already find replay clearly faster, every
 * PROBE_STEADY-th after that, every second PROBE_STEADY-th once CLEAR_RUNS judgements in a row
 * found replay clearly faster.
 * (Warm-up runs are no eager figure: they also record.)
 *
 * Figures are taken from SETTLE_RUNS runs after the first replay on: a program's first steps
 * are no measure of either kind (lazy initialisation, caches growing, other anchors recording or
 * learning their library calls next to this one), and a verdict taken there was seen to turn
 * off a PyTorch step that replays 1.3x faster once settled.
 * Figures are judged in pairs: each eager period against the median of the last replay periods
 * (up to PACE_REPLAYS of the last CGJ_COST_RECENT) at the same place in the program's loop: begun
 * after a step of the same anchor, and ended by a begin that came after a step of the same
 * anchor. A program's pace drifts (a Python interpreter on a shared machine ran the same step at
 * 0.9 ms and at 1.4 ms within seconds), and an eager period taken in one stretch compared with
 * replay periods of another would judge the machine, not replay; and an anchor that begins
 * several steps of one iteration (a PyTorch step after each of its synchronizations) has periods
 * of very different lengths, one per place. When the median of the pairs' ratios (replay /
 * eager) exceeds 1 + MARGIN, and so does the ratio of the pairs' sums (the program spends the
 * sum of its periods: where eager periods scatter, a median can call replay slower while the
 * program runs faster with it), at STRIKES judgements in a row, each on a window of pairs of
 * its own (one window is no verdict, and two that share most of their pairs are hardly two),
 * the anchor goes OFF (reason OFF_COST, with both medians); at one judgement where replay is
 * grossly slower (GROSS_PCT), already at the first EARLY_PAIRS pairs where each finds it so.
 * Off, its steps run eagerly for OFF_RUNS runs the first time (a verdict can still be wrong: it
 * is looked at again soon), then 4, 8, 16 ... times as many (up to 256 times), then replay is
 * tried again with a fresh window of pairs.
 */
#include "tracer/tracer.h"
#include "base/log.h"
#include "base/nvtx.h"

#include <stdio.h>
#include <string.h>

#define PROBE_FIRST 3   /* while the eager window fills: one run in 3 is an eager probe */
#define PROBE_STEADY 64 /* then one in 64 ... */
#define CLEAR_RUNS                                                                           \
    4                  /* ... and one in 128 once this many judgements in a row found replay \
                        * faster by more than the margin (probes are eager runs: each costs  \
                        * what replay saves) */
#define MIN_PAIRS 5    /* pairs needed before a decision */
#define EARLY_PAIRS 3  /* ... but this many that each find replay EARLY_PCT faster end the */
#define EARLY_PCT 5    /* quick probing: replay that does not pay hardly looks like that */
#define UNPAIRED_MAX 8 /* probes in a row with no pair, after which probing slows down */
#define PACE_REPLAYS 4 /* replay periods an eager one is paired with (their median) */
#define MARGIN_PCT                                                         \
    2 /* replay may be this much slower than eager before it is turned off \
       * (the periods' own noise) */
#define STRIKES 2
#define GROSS_PCT                                                                                  \
    25 /* replay this much slower (median and sums) is off at one strike, and already at the first \
        * EARLY_PAIRS pairs where each finds it so */
#define SETTLE_RUNS 16
#define OFF_RUNS 64
#define OFF_DOUBLINGS 7

static uint64_t median(const uint64_t *v, uint32_t n)
{
    uint64_t s[CGJ_COST_EAGER_WINDOW];
    memcpy(s, v, n * sizeof *s);
    for (uint32_t i = 1; i < n; i++) /* insertion sort: n <= 8 */
        for (uint32_t j = i; j > 0 && s[j - 1] > s[j]; j--) {
            uint64_t x = s[j];
            s[j] = s[j - 1], s[j - 1] = x;
        }
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Does trace t launch a graph (a segment not too small for one)? */
static bool trace_launches(const cgj_trace_t *t)
{
    for (uint32_t s = 0; s < t->nsegs; s++)
        if (!t->segs[s].eager && t->segs[s].ncapture) return true;
    return false;
}

/* Does the anchor's current variant launch a graph? Where none of its segments does (each too
 * small for one), replay issues the step's calls as eager execution does, when the program makes
 * them: what it changes is cgjit's own host time inside the step, measured directly there. */
static bool launches_graphs(const cgj_anchor_t *a)
{
    return trace_launches(a->variants[__atomic_load_n(&a->current, __ATOMIC_RELAXED)]);
}

/* Does replay spend more host time inside the step than eager probes do, by more than the
 * margin of the eager period `period_ns` (all a step without graphs can add to the period)? */
static bool host_time_slower(const cgj_anchor_t *a, uint64_t period_ns)
{
    const cgj_cost_t *c = &a->cost;
    uint64_t rr = __atomic_load_n(&a->replays, __ATOMIC_RELAXED), pr = c->probe_runs;
    if (!rr || !pr) return false;
    double r = (double)__atomic_load_n(&a->replay_ns, __ATOMIC_RELAXED) / (double)rr;
    return (r - (double)c->probe_ns / (double)pr) * 1000 > (double)period_ns * (10 * MARGIN_PCT);
}

void cgj_cost_end_eager(cgj_anchor_t *a, uint64_t host_ns, uint64_t calls_ns, uint64_t own_ns)
{
    cgj_cost_t *c = &a->cost;
    c->last_own_ns = 0;
    if (c->last_kind != CGJ_COST_EAGER) return; /* warm-up, recording, a side exit */
    c->last_own_ns = own_ns < host_ns ? own_ns : 0;
    __atomic_fetch_add(&c->probe_ns, host_ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->probe_runs, 1, __ATOMIC_RELAXED);
    if (!calls_ns) return;
    __atomic_fetch_add(&c->probe_calls_ns, calls_ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->timed_probes, 1, __ATOMIC_RELAXED);
}

/* Turn replay of `a` off for OFF_RUNS runs, 4, 8 ... times as many each time after the first,
 * with `why` (its code and detail set; when replay is tried again is added to the detail). */
static void turn_off(cgj_anchor_t *a, cgj_reason_t *why)
{
    cgj_cost_t *c = &a->cost;
    uint32_t k = c->offs < OFF_DOUBLINGS ? c->offs : OFF_DOUBLINGS;
    uint64_t off_runs = (uint64_t)OFF_RUNS << (k ? k + 1 : 0);
    c->offs++;
    c->retry_at = __atomic_load_n(&a->runs, __ATOMIC_RELAXED) + off_runs;
    size_t len = strlen(why->detail);
    snprintf(why->detail + len, sizeof why->detail - len, "; tried again in %llu runs", (unsigned long long)off_runs);
    cgj_anchor_go(a, CGJ_STATE_OFF);
    cgj_anchor_note(a, why);
    CGJ_STAT_ADD(anchors_off, 1);
    char text[320];
    CGJ_LOG(blacklist, "anchor '%s' turned off: %s", a->name, cgj_reason_format(why, text, sizeof text));
}

/* Do the first pairs of a window (EARLY_PAIRS of them, fewer than a decision needs) each find
 * replay's period past `pct` percent of the eager one: under it where pct < 100 (clearly faster),
 * at or over it otherwise (grossly slower)? */
static bool early_pairs_past(const cgj_cost_t *c, uint64_t pct)
{
    if (c->neager < EARLY_PAIRS || c->neager >= MIN_PAIRS) return false;
    for (uint32_t i = 0; i < c->neager; i++) {
        uint64_t r = c->paired[i] * 100, e = c->eager[i] * pct;
        if (pct < 100 ? r >= e : r < e) return false;
    }
    return true;
}

/* The first pairs each find replay slower by GROSS_PCT: that is no noise of the periods (the
 * margin is MARGIN_PCT). In a program of 40 steps, an anchor judged on two windows of MIN_PAIRS
 * pairs replays most of its steps at that pace first (PyTorch's autograd thread, found by its
 * cycles, replayed at 4.7x its eager period for 28 of its 45 runs). A wrong verdict costs
 * OFF_RUNS runs at eager pace, after which replay is tried again. */
static bool slow_early(const cgj_cost_t *c)
{
    return early_pairs_past(c, 100 + GROSS_PCT);
}

/* Enough pairs (or a first few that each find replay grossly slower): compare, and turn replay off
 * where it does not pay. */
static void judge(cgj_anchor_t *a)
{
    cgj_cost_t *c = &a->cost;
    uint32_t n = c->neager < CGJ_COST_EAGER_WINDOW ? (uint32_t)c->neager : CGJ_COST_EAGER_WINDOW;
    if (n < MIN_PAIRS && !slow_early(c)) return;
    uint64_t ratio[CGJ_COST_EAGER_WINDOW], sum_e = 0, sum_r = 0; /* replay / eager, per mille */
    for (uint32_t i = 0; i < n; i++) {
        ratio[i] = c->eager[i] ? c->paired[i] * 1000 / c->eager[i] : 1000;
        sum_e += c->eager[i], sum_r += c->paired[i];
    }
    uint64_t e = median(c->eager, n), r = median(c->paired, n), q = median(ratio, n);
    __atomic_store_n(&c->eager_med_ns, e, __ATOMIC_RELAXED);
    __atomic_store_n(&c->replay_med_ns, r, __ATOMIC_RELAXED);
    /* A strike needs the median ratio past the margin, and the pairs' sums too: what the program
     * spends is the sum of its periods, and a median pulled up by pairs that scatter both ways
     * says nothing of it. */
    bool clear = q < 1000 - 10 * MARGIN_PCT && sum_r * 1000 < sum_e * (1000 - 10 * MARGIN_PCT);
    c->clear = clear ? c->clear + (c->clear < CLEAR_RUNS) : 0;
    /* A step that launches no graph runs the same calls at the same moments replayed or eager:
     * its periods can differ only by cgjit's host time in the step, and where that is not
     * slower a slower period is the program's noise (a 2-op step in a 2 ms Python iteration). */
    bool graphs = launches_graphs(a);
    CGJ_LOG(cost, "anchor '%s': %u pairs, eager %.1f us, replay %.1f us (medians), replay/eager %.2f, sums %.2f%s%s",
            a->name, n, (double)e / 1e3, (double)r / 1e3, (double)q / 1e3, sum_e ? (double)sum_r / (double)sum_e : 0.0,
            graphs ? "" : ", no graph", clear ? ": replay clearly faster" : "");
    if (q <= 1000 + 10 * MARGIN_PCT || sum_r * 1000 <= sum_e * (1000 + 10 * MARGIN_PCT) ||
        a->state != CGJ_STATE_REPLAY || (!graphs && !host_time_slower(a, e))) {
        c->strikes = 0;
        return;
    }
    /* Grossly slower: one strike is enough (slow_early's pairs always are). */
    bool gross = q >= 1000 + 10 * GROSS_PCT && sum_r * 1000 >= sum_e * (1000 + 10 * GROSS_PCT);
    CGJ_LOG(cost, "anchor '%s': replay slower, strike %u of %u%s", a->name, c->strikes + 1, STRIKES,
            gross ? ", grossly: off at once" : "");
    if (!gross && ++c->strikes < STRIKES) {
        /* The next judgement is taken on pairs of its own: two windows that share most of
         * their pairs are little more evidence than one, and where eager periods scatter
         * (a grid that follows the data) one unlucky window would count twice. */
        c->neager = 0;
        return;
    }
    c->strikes = 0;
    cgj_reason_t why;
    cgj_reason_set(
        &why, CGJ_REASON_OFF_COST, CGJ_REASON_NO_OP,
        "replay %.1f us per step against %.1f us eager (medians of %u eager runs, each against the last replays at its place in the loop: replay/eager %.2f)",
        (double)r / 1e3, (double)e / 1e3, n, (double)q / 1e3);
    turn_off(a, &why);
}

/* Runs that record or leave the trace cost what eager execution costs and more (the recording,
 * the re-issued chunk); replays to their end save what eager execution would have cost. Where,
 * over WASTE_RUNS such runs or more, the first exceed the second (each against the anchor's
 * eager host time per run: its probes and its runs while off), the anchor costs the process
 * more than it gives it (a detector whose steps take a new shape every few images): OFF. */
#define WASTE_RUNS 8

void cgj_cost_ended(cgj_anchor_t *a, bool clean, uint64_t host_ns)
{
    cgj_cost_t *c = &a->cost;
    if (clean) c->clean_ns += host_ns, c->clean_runs++;
    else c->waste_ns += host_ns, c->waste_runs++;
    uint64_t er = __atomic_load_n(&a->eager_runs, __ATOMIC_RELAXED);
    if (!cgj_cfg.COST || cgj_verify_on() || clean || a->state != CGJ_STATE_REPLAY || c->waste_runs < WASTE_RUNS || !er)
        return;
    double eager = (double)__atomic_load_n(&a->eager_ns, __ATOMIC_RELAXED) / (double)er;
    double extra = (double)c->waste_ns - eager * (double)c->waste_runs;
    double saved = eager * (double)c->clean_runs - (double)c->clean_ns;
    if (extra <= saved) return;
    cgj_reason_t why;
    cgj_reason_set(&why, CGJ_REASON_OFF_WASTE, CGJ_REASON_NO_OP,
                   "%llu runs that recorded or left the trace cost %.3f ms beyond eager, %llu replays saved %.3f ms",
                   (unsigned long long)c->waste_runs, extra / 1e6, (unsigned long long)c->clean_runs, saved / 1e6);
    turn_off(a, &why);
}

/* A step whose traces launch no graph (every segment shorter than CGJIT_GRAPH_MIN_OPS, or made
 * of copies from host memory that replay stages, graph.c's copies_only) and serve nothing from
 * the pool makes, replayed, the calls eager execution makes, at the same moments, with cgjit's
 * guards around them: it cannot pay, and measuring it only costs probes (the per-token copy of
 * a decoder replayed at 0.99x). Once its runs have replayed to their end NO_GRAPH_STREAK times
 * in a row, its anchor goes OFF (OFF_NO_GRAPH) and its steps run eagerly from then on at no
 * cost; so does one whose every variant is as short (PyTorch's autograd thread, found by its
 * cycles under sync, makes steps of one GEMM and one kernel, in three shapes). Not at the first
 * trace: one trace is one step's shape, and an anchor's first may be its shortest (a PyTorch
 * loop whose first iteration synchronizes right after its input copy, where every later one runs
 * its whole forward pass between that copy and the next synchronization, all at one anchor): a
 * longer step leaves the short traces past their end and is recorded as a variant of its own,
 * which does launch graphs. Under CGJIT_COST=0 such steps replay. */
#define NO_GRAPH_STREAK 8
#define NO_GRAPH_RETRIES 4

static bool cannot_pay(const cgj_anchor_t *a)
{
    uint32_t n = __atomic_load_n(&a->nvariants, __ATOMIC_ACQUIRE);
    for (uint32_t v = 0; v < n; v++) {
        const cgj_trace_t *t = a->variants[v];
        if (trace_launches(t)) return false; /* a graph: may pay */
        for (uint32_t i = 0; i < t->list.n; i++)
            if (cgj_op_class[t->list.ops[i].call.kind] == CGJ_CLASS_POOL) return false; /* pool-served: may pay */
    }
    return n > 0;
}

/* The most ops a variant of a holds (a's variants are its step's shapes). */
static uint32_t longest(const cgj_anchor_t *a)
{
    uint32_t n = __atomic_load_n(&a->nvariants, __ATOMIC_ACQUIRE), most = 0;
    for (uint32_t v = 0; v < n; v++)
        if (a->variants[v]->list.n > most) most = a->variants[v]->list.n;
    return most;
}

void cgj_cost_replayed(cgj_anchor_t *a, bool exited)
{
    cgj_cost_t *c = &a->cost;
    if (!cgj_cfg.COST || a->state != CGJ_STATE_REPLAY || !cannot_pay(a)) return;
    c->short_streak = exited ? 0 : c->short_streak + 1;
    if (c->short_streak < NO_GRAPH_STREAK) return;
    const cgj_trace_t *t = a->variants[0];
    c->no_graph = true;
    c->retry_at = UINT64_MAX;
    cgj_reason_t why;
    cgj_reason_set(&why, CGJ_REASON_OFF_NO_GRAPH, CGJ_REASON_NO_OP,
                   "%u op(s) in %u segment(s)%s, each shorter than %lld or staged copies only", t->list.n, t->nsegs,
                   a->nvariants > 1 ? " and as little in its other variants" : "", (long long)cgj_cfg.GRAPH_MIN_OPS);
    cgj_anchor_go(a, CGJ_STATE_OFF);
    cgj_anchor_note(a, &why);
    CGJ_STAT_ADD(anchors_off, 1);
    char text[320];
    CGJ_LOG(blacklist, "anchor '%s' turned off: %s", a->name, cgj_reason_format(&why, text, sizeof text));
}

/* An anchor off for want of a graph whose eager step ran `calls` calls, more than its longest trace
 * holds and enough for a graph, has steps of another shape (the program's phase changed): replay
 * is tried again, at most NO_GRAPH_RETRIES times, and the longer step leaves the trace and is
 * recorded; where short steps replay NO_GRAPH_STREAK times in a row first, it goes off again. */
void cgj_cost_off_ran(cgj_anchor_t *a, uint32_t calls)
{
    cgj_cost_t *c = &a->cost;
    if (!c->no_graph || !a->nvariants || a->state != CGJ_STATE_OFF || c->no_graph_retries >= NO_GRAPH_RETRIES) return;
    if (calls <= longest(a) || (long long)calls < cgj_cfg.GRAPH_MIN_OPS) return;
    c->no_graph_retries++;
    c->short_streak = 0;
    c->retry_at = __atomic_load_n(&a->runs, __ATOMIC_RELAXED); /* from its next run */
    CGJ_LOG(trace,
            "anchor '%s': a step of %u calls, its traces %u ops at most: replay tried again for a longer variant",
            a->name, calls, longest(a));
}

static bool settled(const cgj_anchor_t *a, uint64_t runs)
{
    uint64_t first = __atomic_load_n(&a->cost.first_replay_run, __ATOMIC_RELAXED);
    return first && runs >= first + SETTLE_RUNS;
}

/* The first pairs each find replay faster by EARLY_PCT: the rest of the first figures come at the
 * steady rate. In a short program (50 runs of a step that spans 8 iterations) each quick probe
 * costs 2% of its steps. */
static bool clear_early(const cgj_cost_t *c)
{
    return early_pairs_past(c, 100 - EARLY_PCT);
}

bool cgj_cost_eager(cgj_anchor_t *a)
{
    cgj_cost_t *c = &a->cost;
    uint64_t runs = __atomic_load_n(&a->runs, __ATOMIC_RELAXED);
    if (a->state == CGJ_STATE_OFF) {
        if (runs < c->retry_at) {
            __atomic_fetch_add(&c->off_runs, 1, __ATOMIC_RELAXED);
            return true;
        }
        c->neager = 0; /* a fresh look at replay */
        c->waste_ns = c->waste_runs = c->clean_ns = c->clean_runs = 0;
        c->nrecent = 0;
        c->unpaired = 0;
        c->clear = 0;
        c->since_probe = 0;
        cgj_anchor_go(a, CGJ_STATE_REPLAY);
        CGJ_LOG(trace, "anchor '%s': replay tried again", a->name);
    }
    /* Under CGJIT_VERIFY each replay also runs the step's calls and compares: slower than eager
     * by design, and turning replay off would stop the checking asked for. */
    if (!cgj_cfg.COST || cgj_verify_on() || !settled(a, runs)) return false;
    /* A quick second look after a judgement found replay slower. Probes that find no replay at
     * their place to pair with (the program takes another path after an eager step) go on at
     * the steady rate: probing one run in 3 for good would cost a third of the replays. A step
     * that launches no graph is probed at the steady rate from the start: replayed, it makes the
     * same calls at the same moments, and a short program would lose a few percent of its steps
     * to probes that can hardly find it slower. */
    bool quick = ((c->neager < MIN_PAIRS && !clear_early(c)) || c->strikes) && c->unpaired < UNPAIRED_MAX &&
                 launches_graphs(a);
    uint32_t every = quick ? PROBE_FIRST : c->clear >= CLEAR_RUNS ? 2 * PROBE_STEADY : PROBE_STEADY;
    if (++c->since_probe < every) return false;
    c->since_probe = 0;
    CGJ_STAT_ADD(steps_probed, 1);
    __atomic_fetch_add(&c->probes, 1, __ATOMIC_RELAXED);
    cgj_nvtx_step_open(CGJ_NVTX_PROBE, a->name); /* closed with the step (threads.c) */
    return true;
}

/* The median of the last (up to PACE_REPLAYS) replay periods at the place from..to; 0: none. */
static uint64_t replay_pace(const cgj_cost_t *c, const void *from, const void *to)
{
    uint64_t v[PACE_REPLAYS];
    uint32_t n = 0, have = c->nrecent < CGJ_COST_RECENT ? c->nrecent : CGJ_COST_RECENT;
    for (uint32_t i = 0; i < have && n < PACE_REPLAYS; i++) {
        uint32_t k = (c->nrecent - 1 - i) % CGJ_COST_RECENT; /* newest first */
        if (c->recent[k].from == from && c->recent[k].to == to) v[n++] = c->recent[k].ns;
    }
    return n ? median(v, n) : 0;
}

/* ---- an eager probe's timing, kept in the thread's probe part (tracer/thread.h) ---- */

void cgj_probe_mark(void)
{
    if (CGJ_UNLIKELY(cgj_tls.probe.probing)) cgj_tls.probe.wrap_in_ns = cgj_now_ns();
}

void cgj_cost_call_in(cgj_thread_t *t, const cgj_call_t *c)
{
    uint64_t now = cgj_now_ns();
    if (t->probe.wrap_in_ns && now > t->probe.wrap_in_ns) t->probe.own_ns += now - t->probe.wrap_in_ns;
    t->probe.wrap_in_ns = 0;
    if (!t->lib_depth && cgj_op_class[c->kind] != CGJ_CLASS_BOUNDARY) t->probe.call_in_ns = now;
}

void cgj_cost_call_out(cgj_thread_t *t)
{
    t->probe.calls_ns += cgj_now_ns() - t->probe.call_in_ns;
    t->probe.call_in_ns = 0;
}

void cgj_cost_call_left(cgj_thread_t *t, uint64_t out_ns)
{
    t->probe.own_ns += cgj_now_ns() - out_ns;
}

void cgj_cost_probe_end(cgj_thread_t *t)
{
    t->probe.probing = false;
}

/* A place's end for the log: the anchor whose step came before a begin (none: the thread's first). */
static const char *place_name(const void *pred)
{
    return pred ? ((const cgj_anchor_t *)pred)->name : "(none)";
}

void cgj_cost_begin(cgj_anchor_t *a, cgj_thread_t *t, const void *pred, uint64_t now, cgj_cost_kind_t kind)
{
    t->probe.probing = kind == CGJ_COST_EAGER;
    t->probe.calls_ns = t->probe.call_in_ns = 0;
    t->probe.own_ns = t->probe.wrap_in_ns = 0;
    cgj_cost_t *c = &a->cost;
    /* While replay is off there is nothing to pair an eager period with, nor anything to judge
     * until replay is tried again, which starts a fresh window: an anchor off for good (a step
     * too short for a graph) would otherwise look for a pair at every run. */
    /* Nor is a period that spans a dormant window of the governor's (govern.c) one of either kind. */
    uint32_t epoch = __atomic_load_n(&cgj_gov_epoch, __ATOMIC_RELAXED);
    if (c->last_thread == t && c->last_kind != CGJ_COST_NONE && now > c->last_ns && a->state != CGJ_STATE_OFF &&
        c->last_epoch == epoch && settled(a, __atomic_load_n(&a->runs, __ATOMIC_RELAXED))) {
        uint64_t ns = now - c->last_ns, pace;
        if (c->last_kind == CGJ_COST_REPLAY) {
            uint32_t k = c->nrecent++ % CGJ_COST_RECENT;
            c->recent[k].ns = ns;
            c->recent[k].from = c->last_pred;
            c->recent[k].to = pred;
        } else if (!(pace = replay_pace(c, c->last_pred, pred))) {
            c->unpaired++;
            CGJ_LOG(cost, "anchor '%s': an eager probe with no replay at its place to pair with (%u in a row)", a->name,
                    c->unpaired);
        } else { /* an eager period, and its pair */
            c->unpaired = 0;
            uint32_t k = c->neager % CGJ_COST_EAGER_WINDOW;
            /* A probe stands for the program without cgjit: its calls' time in cgjit's own code
             * (wrappers, the step's bookkeeping) is no part of eager execution. */
            c->eager[k] = c->last_own_ns < ns ? ns - c->last_own_ns : ns;
            c->paired[k] = pace;
            c->neager++;
            CGJ_LOG(cost,
                    "anchor '%s': pair %llu of its window, after '%s' until after '%s': eager %.1f us, replay %.1f us",
                    a->name, (unsigned long long)c->neager, place_name(c->last_pred), place_name(pred),
                    (double)c->eager[k] / 1e3, (double)pace / 1e3);
            judge(a);
        }
    }
    c->last_thread = t;
    c->last_pred = pred;
    c->last_ns = now;
    c->last_kind = kind;
    c->last_epoch = epoch;
}
