/*
 * workloads_elementwise.cu — workload `elementwise` (--workload elementwise, or ew16M / ew10 alone):
 * steps made only of elementwise kernels, each registered with cgj_op_register_elementwise, so
 * that in modes default and max-autotune cgjit fuses a whole step into one generated kernel. The
 * intermediates live in in-step temporaries, cudaMallocAsync'd on the bench's stream and
 * cudaFreeAsync'd within the step: a fused chain never writes them (nothing reads them after it).
 *
 *  - ew16M: x of 16M floats (1 << 24), U(-1, 1):
 *        t = 2 x + 1          ew_scale_shift(t, x, 2, 1, n)   into the temporary t
 *        out = relu(t)        ew_relu(out, t, n)
 *    Eager moves 256 MB per step (x read, t written, t read, out written); fused, one kernel
 *    reads x and writes out: 128 MB. 2 kernels, 1 cudaMallocAsync, 1 cudaFreeAsync per step.
 *
 *  - ew10: x and a bias vector b of 1M floats each (1 << 20), U(-1, 1) and U(-0.5, 0.5); ten
 *    different kernels through three temporaries t1, t2, t3:
 *         1 ew_scale         t1 = 2 x
 *         2 ew_add_bias      t1 = t1 + b
 *         3 ew_mul           t2 = t1 * x
 *         4 ew_tanh          t2 = tanh(t2)
 *         5 ew_sigmoid       t3 = sigmoid(t1)
 *         6 ew_gelu          t3 = gelu(t3)              (erf form)
 *         7 ew_add           t1 = t2 + t3
 *         8 ew_relu          t2 = relu(t1)
 *         9 ew_add_residual  t2 = t2 + x
 *        10 ew_scale_shift   out = 0.5 t2 - 0.25
 *    Eager moves 96 MB per step; fused, one kernel reads x and b and writes out: 12 MB.
 *    10 kernels, 3 cudaMallocAsync, 3 cudaFreeAsync per step.
 *
 * The model interface of bench_common.h: x (and b) are shared by every set, each set (eager,
 * replay, floor) has its own out. The floor is the unfused kernels captured into a graph on
 * temporaries preallocated in the floor set (as temps' floor): no allocation nodes. The device's
 * default memory pool, which cudaMallocAsync draws from in the eager steps, keeps its memory
 * (release threshold: all), as a caching allocator would, so that an eager step does not map
 * memory anew after every synchronization.
 *
 * Every kernel writes element i of its outputs from element i of its inputs, one thread per
 * element (256 threads a block). The kernels are at namespace scope (not in an anonymous
 * namespace), with names of their own.
 */
#include "bench_common.h"

#include <math.h>
#include <string.h>

enum { EW_THREADS = 256 };

#define EW_FOR(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

__global__ void ew_scale_shift(float *y, const float *x, float a, float b, int n)
{
    EW_FOR(i, n) y[i] = a * x[i] + b;
}
__global__ void ew_relu(float *y, const float *x, int n)
{
    EW_FOR(i, n) y[i] = fmaxf(x[i], 0.0f);
}
__global__ void ew_scale(float *y, const float *x, float a, int n)
{
    EW_FOR(i, n) y[i] = a * x[i];
}
__global__ void ew_add_bias(float *x, const float *b, int n)
{
    EW_FOR(i, n) x[i] = x[i] + b[i];
}
__global__ void ew_mul(float *y, const float *a, const float *b, int n)
{
    EW_FOR(i, n) y[i] = a[i] * b[i];
}
__global__ void ew_tanh(float *x, int n)
{
    EW_FOR(i, n) x[i] = tanhf(x[i]);
}
__global__ void ew_sigmoid(float *y, const float *x, int n)
{
    EW_FOR(i, n) y[i] = 1.0f / (1.0f + expf(-x[i]));
}
__global__ void ew_gelu(float *x, int n)
{
    EW_FOR(i, n)
    {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}
__global__ void ew_add(float *y, const float *a, const float *b, int n)
{
    EW_FOR(i, n) y[i] = a[i] + b[i];
}
__global__ void ew_add_residual(float *x, const float *r, int n)
{
    EW_FOR(i, n) x[i] = x[i] + r[i];
}

/* What each kernel computes, in the spec language of cgjit.h (parameters in the kernel's order);
 * each expression is the kernel's own, so a fused chain is usually bitwise equal to eager. */
static int ew_register(void)
{
    static int done; /* both workloads' descriptors name this: register once, count once */
    if (done) return 0;
    done = 1;
    static const struct {
        const void *fn;
        const char *name, *spec;
    } ops[] = {
        {(const void *)ew_scale_shift, "ew_scale_shift",
         "(out float y, in float x, float a, float b, count int n): y = a * x + b"},
        {(const void *)ew_relu, "ew_relu", "(out float y, in float x, count int n): y = relu(x)"},
        {(const void *)ew_scale, "ew_scale", "(out float y, in float x, float a, count int n): y = a * x"},
        {(const void *)ew_add_bias, "ew_add_bias", "(inout float x, in float b, count int n): x = x + b"},
        {(const void *)ew_mul, "ew_mul", "(out float y, in float a, in float b, count int n): y = a * b"},
        {(const void *)ew_tanh, "ew_tanh", "(inout float x, count int n): x = tanh(x)"},
        {(const void *)ew_sigmoid, "ew_sigmoid", "(out float y, in float x, count int n): y = sigmoid(x)"},
        {(const void *)ew_gelu, "ew_gelu", "(inout float x, count int n): x = gelu(x)"},
        {(const void *)ew_add, "ew_add", "(out float y, in float a, in float b, count int n): y = a + b"},
        {(const void *)ew_add_residual, "ew_add_residual", "(inout float x, in float r, count int n): x = x + r"},
    };
    int refused = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        refused += bench_register_elementwise(ops[k].fn, ops[k].name, ops[k].spec) != 0;
    return refused;
}

namespace
{

enum { EW16M_N = 1 << 24, EW10_N = 1 << 20, MAX_TEMPS = 3 };

struct ew {
    model_data_t d; /* first: model_data_arena reads it. params: b (ew10), x: the input */
    int n, ntemps;
    float *out[MODEL_SETS];
    float *floor_t[MAX_TEMPS]; /* the floor's temporaries, in the floor set's block */
};

int ew_grid(int n)
{
    return (n + EW_THREADS - 1) / EW_THREADS;
}

/* x (and b where nb > 0) uploaded, one block per set of out and ntemps temporaries of n floats. */
ew *ew_create(int n, int nb, int ntemps, uint64_t seed, int keep_host)
{
    ew *m = (ew *)bench_host_calloc(sizeof *m);
    m->n = n;
    m->ntemps = ntemps;
    float *hx = (float *)bench_host_alloc((size_t)n * sizeof(float));
    bench_fill_uniform(hx, (size_t)n, &seed, -1.0f, 1.0f);
    CHECK(cudaMalloc((void **)&m->d.x, (size_t)n * sizeof(float)));
    CHECK(cudaMemcpy(m->d.x, hx, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    float *hb = NULL;
    if (nb > 0) {
        hb = (float *)bench_host_alloc((size_t)nb * sizeof(float));
        bench_fill_uniform(hb, (size_t)nb, &seed, -0.5f, 0.5f);
        CHECK(cudaMalloc((void **)&m->d.params, (size_t)nb * sizeof(float)));
        CHECK(cudaMemcpy(m->d.params, hb, (size_t)nb * sizeof(float), cudaMemcpyHostToDevice));
    }
    if (keep_host) {
        m->d.host_x = hx;
        m->d.host_params = hb;
    } else {
        free(hx);
        free(hb);
    }
    size_t each = bench_align((size_t)n * sizeof(float));
    model_data_arenas(&m->d, each * (size_t)(1 + ntemps));
    for (int set = 0; set < MODEL_SETS; set++) m->out[set] = (float *)m->d.arena[set];
    for (int k = 0; k < ntemps; k++)
        m->floor_t[k] = (float *)((char *)m->d.arena[MODEL_SET_FLOOR] + each * (size_t)(1 + k));

    int dev;
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CHECK(cudaDeviceSynchronize());
    return m;
}

/* The step's temporaries: allocated on s (eager, replay) or the floor's own. */
int temps_take(ew *m, int set, float **t, cudaStream_t s, char *err, size_t errlen)
{
    for (int k = 0; k < m->ntemps; k++) {
        if (set == MODEL_SET_FLOOR) t[k] = m->floor_t[k];
        else STEP_CUDA(cudaMallocAsync((void **)&t[k], (size_t)m->n * sizeof(float), s));
    }
    return 0;
}

int temps_give(ew *m, int set, float **t, cudaStream_t s, char *err, size_t errlen)
{
    if (set != MODEL_SET_FLOOR)
        for (int k = 0; k < m->ntemps; k++) STEP_CUDA(cudaFreeAsync(t[k], s));
    return 0;
}

void ew_output(void *ctx, int set, const float **out, size_t *count)
{
    ew *m = (ew *)ctx;
    *out = m->out[set];
    *count = (size_t)m->n;
}

void ew_destroy(void *ctx)
{
    ew *m = (ew *)ctx;
    model_data_free(&m->d);
    free(m);
}

/* ---- ew16M ---- */

void *ew16_create(cudaStream_t, int keep_host)
{
    return ew_create(EW16M_N, 0, 1, 0x6577313600f00dull, keep_host);
}

int ew16_step(void *ctx, int set, cudaStream_t s, char *err, size_t errlen)
{
    ew *m = (ew *)ctx;
    float *t[MAX_TEMPS];
    if (temps_take(m, set, t, s, err, errlen)) return -1;
    ew_scale_shift<<<ew_grid(m->n), EW_THREADS, 0, s>>>(t[0], m->d.x, 2.0f, 1.0f, m->n);
    STEP_LAUNCHED();
    ew_relu<<<ew_grid(m->n), EW_THREADS, 0, s>>>(m->out[set], t[0], m->n);
    STEP_LAUNCHED();
    return temps_give(m, set, t, s, err, errlen);
}

void ew16_reference(void *ctx, double *ref)
{
    const ew *m = (const ew *)ctx;
    for (int i = 0; i < m->n; i++) {
        double v = 2.0 * m->d.host_x[i] + 1.0;
        ref[i] = v > 0.0 ? v : 0.0;
    }
}

/* ---- ew10 ---- */

void *ew10_create(cudaStream_t, int keep_host)
{
    return ew_create(EW10_N, EW10_N, 3, 0x657731300beefull, keep_host);
}

int ew10_step(void *ctx, int set, cudaStream_t s, char *err, size_t errlen)
{
    ew *m = (ew *)ctx;
    const int n = m->n, g = ew_grid(n);
    const float *x = m->d.x, *b = m->d.params;
    float *t[MAX_TEMPS];
    if (temps_take(m, set, t, s, err, errlen)) return -1;
    ew_scale<<<g, EW_THREADS, 0, s>>>(t[0], x, 2.0f, n);
    STEP_LAUNCHED();
    ew_add_bias<<<g, EW_THREADS, 0, s>>>(t[0], b, n);
    STEP_LAUNCHED();
    ew_mul<<<g, EW_THREADS, 0, s>>>(t[1], t[0], x, n);
    STEP_LAUNCHED();
    ew_tanh<<<g, EW_THREADS, 0, s>>>(t[1], n);
    STEP_LAUNCHED();
    ew_sigmoid<<<g, EW_THREADS, 0, s>>>(t[2], t[0], n);
    STEP_LAUNCHED();
    ew_gelu<<<g, EW_THREADS, 0, s>>>(t[2], n);
    STEP_LAUNCHED();
    ew_add<<<g, EW_THREADS, 0, s>>>(t[0], t[1], t[2], n);
    STEP_LAUNCHED();
    ew_relu<<<g, EW_THREADS, 0, s>>>(t[1], t[0], n);
    STEP_LAUNCHED();
    ew_add_residual<<<g, EW_THREADS, 0, s>>>(t[1], x, n);
    STEP_LAUNCHED();
    ew_scale_shift<<<g, EW_THREADS, 0, s>>>(m->out[set], t[1], 0.5f, -0.25f, n);
    STEP_LAUNCHED();
    return temps_give(m, set, t, s, err, errlen);
}

void ew10_reference(void *ctx, double *ref)
{
    const ew *m = (const ew *)ctx;
    for (int i = 0; i < m->n; i++) {
        double x = m->d.host_x[i], b = m->d.host_params[i];
        double t1 = 2.0 * x + b;
        double t2 = tanh(t1 * x);
        double sg = 1.0 / (1.0 + exp(-t1));
        double t3 = 0.5 * sg * (1.0 + erf(sg * 0.70710678118654752));
        double sum = t2 + t3;
        double r = (sum > 0.0 ? sum : 0.0) + x;
        ref[i] = 0.5 * r - 0.25;
    }
}

} // namespace

const model_desc_t model_ew16M = {
    "ew16M",
    "relu(2x + 1) over 16M floats (1 << 24): ew_scale_shift into an in-step temporary "
    "(cudaMallocAsync/cudaFreeAsync), then ew_relu; 256 MB moved per step eager, 128 MB fused",
    4, /* 2 kernels, 1 cudaMallocAsync, 1 cudaFreeAsync */
    ew16_create,
    ew16_step,
    model_data_arena,
    ew_output,
    ew16_reference,
    ew_destroy,
    ew_register,
};

const model_desc_t model_ew10 = {
    "ew10",
    "10 different elementwise kernels over 1M floats (1 << 20): scale, bias, multiply, tanh, sigmoid, "
    "GELU, add, ReLU, residual, scale-shift, through 3 in-step temporaries (cudaMallocAsync/"
    "cudaFreeAsync); 96 MB moved per step eager, 12 MB fused",
    16, /* 10 kernels, 3 cudaMallocAsync, 3 cudaFreeAsync */
    ew10_create,
    ew10_step,
    model_data_arena,
    ew_output,
    ew10_reference,
    ew_destroy,
    ew_register,
};
