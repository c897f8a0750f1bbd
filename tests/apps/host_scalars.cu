/*
 * host_scalars — an optimizer step's host scalars, different at every step and passed to kernels
 * by value: the step number t, a learning rate from a warmup + cosine schedule, Adam's bias
 * corrections 1 - beta1^t and 1 - beta2^t, a weight decay that only applies after warmup; and a
 * memset whose byte value changes every step (a dropout-like mask pattern keyed by the step).
 *
 * Model: w (NFLOAT floats, NTENSOR parameter tensors of TSIZE) fitted to a target by a weighted
 * quadratic loss. Each step:
 *  - cudaMemsetAsync of the byte mask with value (t * 37) & 0xFF;
 *  - per tensor, grad: g = s * (w - target) where the mask's bit (i & 7) is set (else 0), and
 *    adamw: m, v, w updated with (lr, beta1, beta2, bc1, bc2, eps, wd, t), the weight decay
 *    applied to even tensors only ("weights", not "biases");
 *  - loss: one block sums s * (w - target)^2 / 2 in a fixed order; cudaMemcpy of the loss to
 *    the host (the synchronization).
 * Prints t, lr, the bias corrections and the loss every step, and a checksum of w at the end.
 */
#include "apps_common.h"

#include <math.h>

enum { NTENSOR = 8, TSIZE = 1024, NFLOAT = NTENSOR * TSIZE, BLOCK = 256, TGRID = TSIZE / BLOCK };
enum { ITERS = 500, TIMED_LAST = 250, WARMUP = 50 };

static const float LR_MAX = 0.05f, LR_MIN = 0.005f, BETA1 = 0.9f, BETA2 = 0.999f, EPS = 1e-8f;

__global__ void grad(float *g, const float *w, const float *target, const float *s, const unsigned char *mask, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned bit = (mask[i] >> (i & 7)) & 1u;
        g[i] = bit ? s[i] * (w[i] - target[i]) : 0.0f;
    }
}

__global__ void adamw(float *w, float *m, float *v, const float *g, float lr, float beta1, float beta2, float bc1,
                      float bc2, float eps, float wd, int t, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
        float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        m[i] = mi;
        v[i] = vi;
        float upd = (mi / bc1) / (sqrtf(vi / bc2) + eps);
        /* every 64th weight is frozen on odd steps: t matters beyond the corrections */
        if ((i & 63) == 0 && (t & 1)) continue;
        w[i] -= lr * (upd + wd * w[i]);
    }
}

__global__ void loss_kernel(const float *w, const float *target, const float *s, int n, float *loss)
{
    __shared__ float part[BLOCK];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float d = w[i] - target[i];
        acc += 0.5f * s[i] * d * d;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if ((int)threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) *loss = part[0] / (float)n;
}

/* Linear warmup to LR_MAX over WARMUP steps, then cosine decay to LR_MIN at the last step. */
static float lr_at(int t)
{
    if (t <= WARMUP) return LR_MAX * (float)t / (float)WARMUP;
    float progress = (float)(t - WARMUP) / (float)(ITERS - WARMUP);
    return LR_MIN + 0.5f * (LR_MAX - LR_MIN) * (1.0f + cosf(3.14159265f * progress));
}

int main(void)
{
    static float h_w[NFLOAT], h_target[NFLOAT], h_s[NFLOAT];
    uint64_t rng = 1234;
    app_fill_uniform(h_w, NFLOAT, &rng, -1.0f, 1.0f);
    app_fill_uniform(h_target, NFLOAT, &rng, -2.0f, 2.0f);
    app_fill_uniform(h_s, NFLOAT, &rng, 0.1f, 3.0f);

    float *d_w, *d_target, *d_s, *d_g, *d_m, *d_v, *d_loss;
    unsigned char *d_mask;
    unsigned long long *d_sum;
    CHECK(cudaMalloc(&d_w, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_target, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_s, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_g, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_m, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_v, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_loss, sizeof(float)));
    CHECK(cudaMalloc(&d_mask, NFLOAT));
    CHECK(cudaMalloc(&d_sum, sizeof *d_sum));
    CHECK(cudaMemcpy(d_w, h_w, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_target, h_target, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_s, h_s, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_m, 0, NFLOAT * sizeof(float)));
    CHECK(cudaMemset(d_v, 0, NFLOAT * sizeof(float)));

    static double t_us[ITERS];
    for (int t = 1; t <= ITERS; t++) {
        float lr = lr_at(t);
        float bc1 = 1.0f - powf(BETA1, (float)t);
        float bc2 = 1.0f - powf(BETA2, (float)t);
        float wd = t > WARMUP ? 0.01f : 0.0f;
        int mask_value = (t * 37) & 0xFF;

        double t0 = app_now_us();
        CHECK(cudaMemsetAsync(d_mask, mask_value, NFLOAT, 0));
        for (int k = 0; k < NTENSOR; k++) {
            size_t o = (size_t)k * TSIZE;
            grad<<<TGRID, BLOCK>>>(d_g + o, d_w + o, d_target + o, d_s + o, d_mask + o, TSIZE);
            adamw<<<TGRID, BLOCK>>>(d_w + o, d_m + o, d_v + o, d_g + o, lr, BETA1, BETA2, bc1, bc2, EPS,
                                    k % 2 ? 0.0f : wd, t, TSIZE);
        }
        loss_kernel<<<1, BLOCK>>>(d_w, d_target, d_s, NFLOAT, d_loss);
        CHECK_LAST();
        float loss;
        CHECK(cudaMemcpy(&loss, d_loss, sizeof loss, cudaMemcpyDeviceToHost));
        t_us[t - 1] = app_now_us() - t0;

        printf("step %3d lr=%a bc1=%a bc2=%a mask=%02x loss=%a\n", t, lr, bc1, bc2, mask_value, loss);
    }

    app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_w, NFLOAT, d_sum);
    CHECK_LAST();
    unsigned long long sum;
    CHECK(cudaMemcpy(&sum, d_sum, sizeof sum, cudaMemcpyDeviceToHost));
    printf("w checksum %016llx\n", sum);

    CHECK(cudaFree(d_w));
    CHECK(cudaFree(d_target));
    CHECK(cudaFree(d_s));
    CHECK(cudaFree(d_g));
    CHECK(cudaFree(d_m));
    CHECK(cudaFree(d_v));
    CHECK(cudaFree(d_loss));
    CHECK(cudaFree(d_mask));
    CHECK(cudaFree(d_sum));
    app_report_time("host_scalars", t_us, ITERS, TIMED_LAST);
    return 0;
}
