/*
 * ddp_trainer — data-parallel training with NCCL, in both layouts real programs use:
 *   ddp_trainer   one process per GPU: the parent forks one child per rank before touching
 *                 CUDA; rank 0 makes the NCCL id and hands it to the others through shared
 *                 memory; each child calls ncclCommInitRank (as under mpirun or torchrun);
 *   ddp_threads   one process driving every GPU: ncclCommInitAll, then a thread per device.
 * The step is ddp_model.h's (cuBLAS MLP, gradients all-reduced in two buckets, AdamW, a loss
 * read back every step). Ranks: $DDP_RANKS, else every GPU (at most 8); one GPU runs one rank.
 * Steps: $DDP_STEPS (default 400).
 *
 * Started by another launcher (ddp_trainer only): with $DDP_RANK set, the process is that one
 * rank of $DDP_RANKS, and the ranks meet through the NCCL id rank 0 writes to $DDP_ID_FILE (as
 * torchrun hands its workers their rank in the environment); it prints its own rank's line.
 *
 * Output (stdout, exact): rank 0's summed loss every step as a hex float; at the end every
 * rank's weight checksum and whether all ranks hold the same weights. Timing (stderr): rank 0's
 * median step time, as apps_common.h reports it.
 */
#include "apps_common.h"
#include "ddp_model.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { STEPS = 400, MAX_RANKS = 8 };
static int g_steps = STEPS; /* $DDP_STEPS */

#ifdef DDP_THREADS_LAYOUT
#define APP_NAME "ddp_threads"
#else
#define APP_NAME "ddp_trainer"
#endif

/* What the ranks report back (shared memory across the forked children). */
typedef struct shared {
    ncclUniqueId id;
    int id_ready;
    uint64_t checksum[MAX_RANKS];
    int done[MAX_RANKS];
} shared_t;

#ifndef DDP_THREADS_LAYOUT
/* Rank 0 writes the id to `path` (whole, by rename); the others wait for it. */
static void share_id_by_file(shared_t *sh, int rank, const char *path)
{
    if (rank == 0) {
        DDP_CKN(ncclGetUniqueId(&sh->id));
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&sh->id, sizeof sh->id, 1, f) != 1 || fclose(f) || rename(tmp, path)) {
            fprintf(stderr, APP_NAME ": cannot write %s\n", path);
            exit(1);
        }
    } else {
        for (int tries = 0;; tries++) {
            FILE *f = fopen(path, "rb");
            size_t got = f ? fread(&sh->id, sizeof sh->id, 1, f) : 0;
            if (f) fclose(f);
            if (got == 1) break;
            if (tries > 60000) {
                fprintf(stderr, APP_NAME ": no NCCL id in %s\n", path);
                exit(1);
            }
            usleep(1000);
        }
    }
    sh->id_ready = 1;
}
#endif

typedef struct rank_arg {
    int rank, nranks;
    ncclComm_t comm; /* threads: made by ncclCommInitAll */
    shared_t *sh;
} rank_arg_t;

static void *run_rank(void *p)
{
    rank_arg_t *a = (rank_arg_t *)p;
    CHECK(cudaSetDevice(a->rank));
    ncclComm_t comm = a->comm;
    if (!comm) {
        /* Rank 0 makes the id unless a launcher's file already carried it to the others. */
        if (a->rank == 0 && !__atomic_load_n(&a->sh->id_ready, __ATOMIC_ACQUIRE)) {
            DDP_CKN(ncclGetUniqueId(&a->sh->id));
            __atomic_store_n(&a->sh->id_ready, 1, __ATOMIC_RELEASE);
        }
        while (!__atomic_load_n(&a->sh->id_ready, __ATOMIC_ACQUIRE)) usleep(1000);
        DDP_CKN(ncclCommInitRank(&comm, a->nranks, a->sh->id, a->rank));
    }
    ddp_rank_t r;
    ddp_create(&r, a->rank, a->nranks, comm);
    double *t_us = (double *)calloc(g_steps, sizeof(double));
    if (!t_us) exit(1);
    for (int step = 0; step < g_steps; step++) {
        double t0 = app_now_us();
        float loss = ddp_step(&r, step);
        if (a->rank == 0) {
            t_us[step] = app_now_us() - t0;
            printf("step %3d loss %a\n", step, loss);
        }
    }
    a->sh->checksum[a->rank] = ddp_checksum(&r);
    a->sh->done[a->rank] = 1;
    ddp_destroy(&r);
    DDP_CKN(ncclCommDestroy(comm));
    if (a->rank == 0) app_report_time(APP_NAME, t_us, g_steps, g_steps / 2);
    free(t_us);
    fflush(stdout);
    return NULL;
}

/* Ranks: $DDP_RANKS, else the number of GPUs, read in a child so the parent never touches
 * CUDA before it forks. */
static int rank_count(void)
{
    const char *e = getenv("DDP_RANKS");
    if (e && *e) {
        int n = atoi(e);
        if (n < 1 || n > MAX_RANKS) {
            fprintf(stderr, APP_NAME ": DDP_RANKS must be 1 to %d\n", MAX_RANKS);
            exit(2);
        }
        return n;
    }
    int pfd[2];
    if (pipe(pfd)) exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
        if (write(pfd[1], &n, sizeof n) != sizeof n) _exit(1);
        _exit(0);
    }
    int n = 0, st;
    if (read(pfd[0], &n, sizeof n) != sizeof n) n = 0;
    waitpid(pid, &st, 0);
    close(pfd[0]), close(pfd[1]);
    if (n < 1) {
        fprintf(stderr, APP_NAME ": no GPU\n");
        exit(1);
    }
    return n < MAX_RANKS ? n : MAX_RANKS;
}

int main(void)
{
    const char *st = getenv("DDP_STEPS");
    if (st && *st && (g_steps = atoi(st)) < 2) {
        fprintf(stderr, APP_NAME ": DDP_STEPS must be 2 or more\n");
        return 2;
    }
#ifndef DDP_THREADS_LAYOUT
    const char *er = getenv("DDP_RANK");
    if (er && *er) { /* one rank, started by another launcher */
        const char *en = getenv("DDP_RANKS"), *idf = getenv("DDP_ID_FILE");
        int rank = atoi(er), n = en ? atoi(en) : 0;
        if (n < 1 || n > MAX_RANKS || rank < 0 || rank >= n || !idf || !*idf) {
            fprintf(stderr, APP_NAME ": DDP_RANK needs DDP_RANKS (1 to %d) and DDP_ID_FILE\n", MAX_RANKS);
            return 2;
        }
        static shared_t one;
        share_id_by_file(&one, rank, idf);
        rank_arg_t a = {rank, n, NULL, &one};
        run_rank(&a);
        printf("rank %d weights %016llx\n", rank, (unsigned long long)one.checksum[rank]);
        return 0;
    }
#endif
    int n = rank_count();
    shared_t *sh = (shared_t *)mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 1;
    memset(sh, 0, sizeof *sh);
    rank_arg_t args[MAX_RANKS];
    for (int i = 0; i < n; i++) args[i] = (rank_arg_t){i, n, NULL, sh};
    fflush(stdout);
#ifdef DDP_THREADS_LAYOUT
    ncclComm_t comms[MAX_RANKS];
    DDP_CKN(ncclCommInitAll(comms, n, NULL));
    pthread_t th[MAX_RANKS];
    for (int i = 0; i < n; i++) {
        args[i].comm = comms[i];
        if (pthread_create(&th[i], NULL, run_rank, &args[i])) return 1;
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
#else
    pid_t pids[MAX_RANKS];
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) return 1;
        if (pids[i] == 0) {
            run_rank(&args[i]);
            exit(0); /* as a rank of torchrun or mpirun ends: exit handlers run */
        }
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) failed = 1;
    }
    if (failed) {
        fprintf(stderr, APP_NAME ": a rank failed\n");
        return 1;
    }
#endif
    int agree = 1;
    for (int i = 0; i < n; i++) {
        printf("rank %d weights %016llx\n", i, (unsigned long long)sh->checksum[i]);
        agree &= sh->done[i] && sh->checksum[i] == sh->checksum[0];
    }
    printf("ranks agree: %s\n", agree ? "yes" : "NO");
    return agree ? 0 : 1;
}
