/*
 * cudnn_loop — a loop around cuDNN (legacy API): cuDNN's own kernels on one created stream that
 * the handle is bound to, with a workspace allocated once before the loop, as a framework's
 * inference or training step has them.
 *
 * A small NCHW fp32 convolution layer run as a recurrence: state Y (1x16x32x32), S = relu(Y),
 * fixed filter W (16x16x3x3, pad 1, stride 1) and bias B (1x16x1x1). Each iteration:
 *   Y = CONV_ALPHA * conv(S, W) + 1 * Y   cudnnConvolutionForward, IMPLICIT_GEMM, CUDNN_FMA_MATH
 *                                         (plain fp32 FMA, no TF32 tensor ops: CUDNN_DEFAULT_MATH
 *                                         would allow TF32 on Ampere and later)
 *   Y = 1 * B + 1 * Y                     cudnnAddTensor (the bias, broadcast over H and W)
 *   S = relu(Y)                           cudnnActivationForward
 *   checksums of Y and S and Y's first floats into one record, one cudaMemcpyAsync of the record
 *   to pinned host memory, cudaStreamSynchronize (the iteration's only synchronization).
 * Y integrates (beta 1), so it changes every iteration and never settles on a fixed point; the
 * small CONV_ALPHA keeps its growth over 300 iterations modest (a host simulation of the loop:
 * mean |Y| goes from 0.5 to about 4.5, max |Y| below 20). All scalars are constant.
 * Prints the record every iteration. These cuDNN operations are deterministic, so the output is
 * exact.
 */
#include "apps_common.h"

#include <cudnn.h>

#define CHECK_CUDNN(call)                                                                                           \
    do {                                                                                                            \
        cudnnStatus_t st_ = (call);                                                                                 \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                                          \
            fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call, cudnnGetErrorString(st_), (int)st_); \
            exit(1);                                                                                                \
        }                                                                                                           \
    } while (0)

enum { BATCH = 1, CH = 16, HW = 32, KSIZE = 3, PAD = 1 };
enum { NACT = BATCH * CH * HW * HW, NFILT = CH * CH * KSIZE * KSIZE };
enum { ITERS = 300, TIMED_LAST = 100 };

static const float CONV_ALPHA = 0.02f, ONE = 1.0f, ZERO = 0.0f;

struct result {
    unsigned long long sum_y, sum_s;
    float head[4];
};

int main(void)
{
    static float h_w[NFILT], h_y[NACT], h_b[CH];
    uint64_t rng = 23;
    app_fill_uniform(h_w, NFILT, &rng, -1.0f / 12.0f, 1.0f / 12.0f); /* ~ 1/sqrt(fan-in 144) */
    app_fill_uniform(h_y, NACT, &rng, -1.0f, 1.0f);
    app_fill_uniform(h_b, CH, &rng, -0.01f, 0.01f);

    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    cudnnHandle_t handle;
    CHECK_CUDNN(cudnnCreate(&handle));
    CHECK_CUDNN(cudnnSetStream(handle, stream));

    cudnnTensorDescriptor_t act_desc, bias_desc;
    cudnnFilterDescriptor_t filt_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnActivationDescriptor_t relu_desc;
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&act_desc));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(act_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, BATCH, CH, HW, HW));
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&bias_desc));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(bias_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CH, 1, 1));
    CHECK_CUDNN(cudnnCreateFilterDescriptor(&filt_desc));
    CHECK_CUDNN(cudnnSetFilter4dDescriptor(filt_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CH, CH, KSIZE, KSIZE));
    CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&conv_desc));
    CHECK_CUDNN(
        cudnnSetConvolution2dDescriptor(conv_desc, PAD, PAD, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CHECK_CUDNN(cudnnSetConvolutionMathType(conv_desc, CUDNN_FMA_MATH));
    CHECK_CUDNN(cudnnCreateActivationDescriptor(&relu_desc));
    CHECK_CUDNN(cudnnSetActivationDescriptor(relu_desc, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));

    /* The output shape must equal the input's (pad 1, stride 1) for the recurrence. */
    int on, oc, oh, ow;
    CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv_desc, act_desc, filt_desc, &on, &oc, &oh, &ow));
    if (on != BATCH || oc != CH || oh != HW || ow != HW) {
        fprintf(stderr, "cudnn_loop: unexpected output shape %dx%dx%dx%d\n", on, oc, oh, ow);
        return 1;
    }

    const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t ws_size = 0;
    CHECK_CUDNN(
        cudnnGetConvolutionForwardWorkspaceSize(handle, act_desc, filt_desc, conv_desc, act_desc, algo, &ws_size));
    /* Allocated once, before the loop; never empty, so that there is a real buffer to pass. */
    size_t ws_alloc = ws_size > 256 ? ws_size : 256;
    void *d_ws;
    CHECK(cudaMalloc(&d_ws, ws_alloc));

    float *d_w, *d_y, *d_s, *d_b;
    struct result *d_res, *h_res;
    CHECK(cudaMalloc(&d_w, NFILT * sizeof(float)));
    CHECK(cudaMalloc(&d_y, NACT * sizeof(float)));
    CHECK(cudaMalloc(&d_s, NACT * sizeof(float)));
    CHECK(cudaMalloc(&d_b, CH * sizeof(float)));
    CHECK(cudaMalloc(&d_res, sizeof *d_res));
    CHECK(cudaMallocHost(&h_res, sizeof *h_res));
    CHECK(cudaMemcpy(d_w, h_w, NFILT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_y, h_y, NACT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_b, h_b, CH * sizeof(float), cudaMemcpyHostToDevice));
    /* S = relu(Y) for the first iteration's convolution input. */
    CHECK_CUDNN(cudnnActivationForward(handle, relu_desc, &ONE, act_desc, d_y, &ZERO, act_desc, d_s));
    CHECK(cudaStreamSynchronize(stream));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        CHECK_CUDNN(cudnnConvolutionForward(handle, &CONV_ALPHA, act_desc, d_s, filt_desc, d_w, conv_desc, algo, d_ws,
                                            ws_alloc, &ONE, act_desc, d_y));
        CHECK_CUDNN(cudnnAddTensor(handle, &ONE, bias_desc, d_b, &ONE, act_desc, d_y));
        CHECK_CUDNN(cudnnActivationForward(handle, relu_desc, &ONE, act_desc, d_y, &ZERO, act_desc, d_s));
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS, 0, stream>>>(d_y, NACT, &d_res->sum_y);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS, 0, stream>>>(d_s, NACT, &d_res->sum_s);
        CHECK_LAST();
        CHECK(cudaMemcpyAsync(d_res->head, d_y, sizeof d_res->head, cudaMemcpyDeviceToDevice, stream));
        CHECK(cudaMemcpyAsync(h_res, d_res, sizeof *h_res, cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));
        t_us[it] = app_now_us() - t0;

        printf("iter %3d sum_y=%016llx sum_s=%016llx head: %a %a %a %a\n", it, h_res->sum_y, h_res->sum_s,
               h_res->head[0], h_res->head[1], h_res->head[2], h_res->head[3]);
    }

    CHECK_CUDNN(cudnnDestroyActivationDescriptor(relu_desc));
    CHECK_CUDNN(cudnnDestroyConvolutionDescriptor(conv_desc));
    CHECK_CUDNN(cudnnDestroyFilterDescriptor(filt_desc));
    CHECK_CUDNN(cudnnDestroyTensorDescriptor(bias_desc));
    CHECK_CUDNN(cudnnDestroyTensorDescriptor(act_desc));
    CHECK_CUDNN(cudnnDestroy(handle));
    CHECK(cudaFree(d_ws));
    CHECK(cudaFree(d_w));
    CHECK(cudaFree(d_y));
    CHECK(cudaFree(d_s));
    CHECK(cudaFree(d_b));
    CHECK(cudaFree(d_res));
    CHECK(cudaFreeHost(h_res));
    CHECK(cudaStreamDestroy(stream));
    app_report_time("cudnn_loop", t_us, ITERS, TIMED_LAST);
    return 0;
}
