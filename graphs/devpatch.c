/* devpatch.c — patching kernel nodes from the GPU; see devpatch.h. */
#include "graphs/devpatch.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

/* The image scripts/devpatch-image.sh embeds (empty where the library was built without nvcc). */
extern const unsigned char cgj_devpatch_image[];
extern const size_t cgj_devpatch_image_size;

#define MAX_CONTEXTS 16

typedef struct loaded {
    CUcontext ctx;
    CUfunction fn; /* NULL: it cannot run in ctx */
} loaded_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static loaded_t loaded[MAX_CONTEXTS];
static uint32_t nloaded;

static CUfunction load(void)
{
    CUmodule m = NULL;
    CUfunction f = NULL;
    if (!cgj_devpatch_image_size) {
        CGJ_LOG(graphs, "no patch kernel in this build (made without nvcc): nodes are patched from the host");
        return NULL;
    }
    if (!cgj_drv.r_cuGraphKernelNodeSetAttribute || !cgj_drv.r_cuGraphKernelNodeGetAttribute) {
        CGJ_LOG(graphs, "the driver has no kernel node attributes: nodes are patched from the host");
        return NULL;
    }
    CUresult r = cgj_drv.r_cuModuleLoadData(&m, cgj_devpatch_image);
    if (r == CUDA_SUCCESS) r = cgj_drv.r_cuModuleGetFunction(&f, m, "cgj_devpatch");
    if (r != CUDA_SUCCESS) {
        CGJ_LOG(graphs, "the patch kernel does not load here (%s): nodes are patched from the host",
                cgj_driver_errstr(r));
        return NULL;
    }
    return f;
}

CUfunction cgj_devpatch_kernel(CUcontext ctx)
{
    CUcontext cur = NULL;
    if (!cgj_cfg.DEVICE_PATCH || !ctx || !cgj_drv.r_cuCtxGetCurrent ||
        cgj_drv.r_cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx)
        return NULL;
    CUfunction f = NULL;
    pthread_mutex_lock(&lock);
    uint32_t i = 0;
    while (i < nloaded && loaded[i].ctx != ctx) i++;
    if (i < nloaded) {
        f = loaded[i].fn;
    } else if (nloaded < MAX_CONTEXTS) {
        f = load();
        loaded[nloaded++] = (loaded_t){.ctx = ctx, .fn = f};
    }
    pthread_mutex_unlock(&lock);
    return f;
}

bool cgj_devpatch_mark(CUgraphNode node, CUgraphDeviceNode *dn)
{
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    v.deviceUpdatableKernelNode.deviceUpdatable = 1;
    if (cgj_drv.r_cuGraphKernelNodeSetAttribute(node, CU_KERNEL_NODE_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v) !=
        CUDA_SUCCESS)
        return false;
    memset(&v, 0, sizeof v);
    if (cgj_drv.r_cuGraphKernelNodeGetAttribute(node, CU_KERNEL_NODE_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v) !=
            CUDA_SUCCESS ||
        !v.deviceUpdatableKernelNode.devNode)
        return false; /* opted in, but with no handle: patched from the host, which such a node allows */
    *dn = v.deviceUpdatableKernelNode.devNode;
    return true;
}

/* The patch node's launch: always the blocks a full block needs (its block changes, its shape not). */
enum { NODE_BLOCKS = (CGJ_DEVPATCH_ENTRIES + CGJ_DEVPATCH_THREADS - 1) / CGJ_DEVPATCH_THREADS };

CUresult cgj_devpatch_capture_node(CUfunction fn, CUstream cap)
{
    static cgj_devpatch_block_t empty; /* n = 0: the node writes nothing until it is given a block */
    void *args[] = {&empty};
    return cgj_drv.r_cuLaunchKernel(fn, NODE_BLOCKS, 1, 1, CGJ_DEVPATCH_THREADS, 1, 1, 0, cap, args, NULL);
}

CUresult cgj_devpatch_set_node(CUgraphExec exec, CUgraphNode node, CUfunction fn, cgj_devpatch_block_t *b)
{
    void *args[] = {b};
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    memset(&p, 0, sizeof p);
    p.func = fn;
    p.gridDimX = NODE_BLOCKS, p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = CGJ_DEVPATCH_THREADS, p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    return cgj_drv.r_cuGraphExecKernelNodeSetParams_v2(exec, node, &p);
}

void cgj_devpatch_forked(void)
{
    pthread_mutex_init(&lock, NULL);
    nloaded = 0;
}
