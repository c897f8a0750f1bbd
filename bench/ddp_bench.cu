/*
 * ddp_bench.cu — cgjit-bench-ddp: the `ddp` workload, a data-parallel training step with NCCL
 * (tests/apps/ddp_model.h: a cuBLAS MLP, gradients all-reduced in two buckets and the loss in a
 * third, AdamW, a loss read back every step), eager against replayed by cgjit, per GPU.
 *
 * One process, a thread per GPU, communicators from ncclCommInitAll. Each thread holds two
 * replicas of its rank from the same initial weights: one trained eagerly, one trained with each
 * step between cgj_trace_begin("ddp<rank>") and cgj_trace_end(). Rounds alternate a block of eager
 * steps and a block of replayed steps; all ranks run the same sequence, so every collective
 * meets its peers. The figures are the medians over rounds of the mean step time of a block, per
 * rank; at the end each rank's replayed weights must equal its eager weights bit for bit, and
 * every rank must hold the same weights.
 *
 * Usage: cgjit-bench-ddp [--ranks N] [--rounds R] [--steps S]  (defaults: every GPU, 10, 100).
 * Exit status: 0 identical and replayed; 1 a check failed; 2 bad options; 77 no GPU.
 */
#include "../tests/apps/ddp_model.h"

#include <cgjit.h>
#include <pthread.h>
#include <time.h>

enum { MAX_RANKS = 8, WARMUP = 10 };

typedef struct rank_run {
    int rank, nranks, rounds, steps;
    ncclComm_t comm;
    double *eager_us, *replay_us; /* per round: mean step time of the block */
    uint64_t sum_eager, sum_replay;
    uint64_t replays;
    pthread_barrier_t *bar;
} rank_run_t;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Each rank's step is an anchor of its own ("ddp0", "ddp1", ...): one thread at a time runs a
 * given anchor's step, and ranks run theirs at the same time. */
static void anchor_name(char *name, size_t len, int rank)
{
    snprintf(name, len, "ddp%d", rank);
}

static void replayed_step(ddp_rank_t *r, int step)
{
    char name[16];
    anchor_name(name, sizeof name, r->rank);
    if (cgj_trace_begin(name) != CGJ_OK) {
        fprintf(stderr, "cgjit-bench-ddp: cgj_trace_begin failed\n");
        exit(1);
    }
    ddp_step(r, step);
    if (cgj_trace_end() != CGJ_OK) {
        fprintf(stderr, "cgjit-bench-ddp: cgj_trace_end failed\n");
        exit(1);
    }
}

static void *run_rank(void *p)
{
    rank_run_t *a = (rank_run_t *)p;
    DDP_CK(cudaSetDevice(a->rank));
    ddp_rank_t e, t;
    ddp_create(&e, a->rank, a->nranks, a->comm);
    ddp_create(&t, a->rank, a->nranks, a->comm);
    int step = 0;
    for (; step < WARMUP; step++) {
        ddp_step(&e, step);
        replayed_step(&t, step);
    }
    for (int round = 0; round < a->rounds; round++) {
        pthread_barrier_wait(a->bar); /* the ranks start each block together */
        double t0 = now_us();
        for (int k = 0; k < a->steps; k++) ddp_step(&e, step + k);
        double t1 = now_us();
        for (int k = 0; k < a->steps; k++) replayed_step(&t, step + k);
        double t2 = now_us();
        step += a->steps;
        a->eager_us[round] = (t1 - t0) / a->steps;
        a->replay_us[round] = (t2 - t1) / a->steps;
    }
    a->sum_eager = ddp_checksum(&e);
    a->sum_replay = ddp_checksum(&t);
    cgj_trace_info_t info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    char name[16];
    anchor_name(name, sizeof name, a->rank);
    if (cgj_trace_info_read(name, &info) == CGJ_OK) a->replays = info.replays;
    ddp_destroy(&e);
    ddp_destroy(&t);
    return NULL;
}

int main(int argc, char **argv)
{
    int ranks = 0, rounds = 10, steps = 100;
    for (int i = 1; i < argc; i++) {
        int *dst = !strcmp(argv[i], "--ranks")  ? &ranks
                 : !strcmp(argv[i], "--rounds") ? &rounds
                 : !strcmp(argv[i], "--steps")  ? &steps
                                                : NULL;
        if (!dst || i + 1 >= argc || (*dst = atoi(argv[++i])) < 1) {
            fprintf(stderr, "usage: %s [--ranks N] [--rounds R] [--steps S]\n", argv[0]);
            return 2;
        }
    }
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
        printf("cgjit-bench-ddp: no CUDA GPU\n");
        return 77;
    }
    if (!ranks) ranks = ngpu < MAX_RANKS ? ngpu : MAX_RANKS;
    if (ranks > ngpu || ranks > MAX_RANKS) {
        fprintf(stderr, "cgjit-bench-ddp: --ranks %d, but %d GPU(s)\n", ranks, ngpu);
        return 2;
    }
    cudaDeviceProp prop;
    DDP_CK(cudaGetDeviceProperties(&prop, 0));
    ncclComm_t comms[MAX_RANKS];
    DDP_CKN(ncclCommInitAll(comms, ranks, NULL));
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)ranks);
    rank_run_t runs[MAX_RANKS];
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < ranks; r++) {
        runs[r] = (rank_run_t){r,
                               ranks,
                               rounds,
                               steps,
                               comms[r],
                               (double *)calloc(rounds, sizeof(double)),
                               (double *)calloc(rounds, sizeof(double)),
                               0,
                               0,
                               0,
                               &bar};
        if (pthread_create(&th[r], NULL, run_rank, &runs[r])) return 1;
    }
    for (int r = 0; r < ranks; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < ranks; r++) DDP_CKN(ncclCommDestroy(comms[r]));

    printf("workload ddp: %d rank(s) on %s, one thread per GPU; MLP %dx%dx%d batch %d per rank, 6 cublasSgemm, "
           "8 kernels and 3 ncclAllReduce per step, a loss read back every step; median of %d rounds x %d steps\n",
           ranks, prop.name, DDP_D, DDP_H, DDP_O, DDP_B, rounds, steps);
    printf("| rank | eager us/step | replay us/step | eager/replay | replayed steps | replay == eager |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | --- |\n");
    int ok = 1;
    for (int r = 0; r < ranks; r++) {
        double eu = median(runs[r].eager_us, rounds), ru = median(runs[r].replay_us, rounds);
        int same = runs[r].sum_eager == runs[r].sum_replay;
        ok &= same && runs[r].sum_replay == runs[0].sum_replay && runs[r].replays > 0;
        printf("| %d | %.1f | %.1f | %.2f | %llu of %d | %s |\n", r, eu, ru, eu / ru,
               (unsigned long long)runs[r].replays, WARMUP + rounds * steps, same ? "identical" : "DIFFERS");
    }
    printf("ranks agree: %s\n", ok ? "yes" : "NO");
    printf("ddp: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
