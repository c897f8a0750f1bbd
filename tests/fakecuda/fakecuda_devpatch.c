/*
 * fakecuda_devpatch.c — device-updatable kernel nodes, and the one module this fake loads:
 * cgjit's patch kernel (graphs/devpatch.cu), run as a host function with the same contract.
 *
 *  - cuGraphKernelNodeSetAttribute / GetAttribute know CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
 *    only (any other attribute: CUDA_ERROR_NOT_SUPPORTED). As in the driver, a node that opted in
 *    cannot opt out, and its graph is instantiated once at a time (fakecuda_graph.c); its device
 *    handle is the node's own handle.
 *  - cuModuleLoadData accepts a CUDA fat binary (cgjit embeds one image of that kind) and refuses
 *    anything else with CUDA_ERROR_NOT_SUPPORTED, as before this file existed; cuModuleGetFunction
 *    knows "cgj_devpatch" only.
 *  - The patch kernel writes each entry's bytes at its offset into the parameters of the exec op
 *    its node was instantiated into. Run as a node of a graph, what it wrote holds for the nodes
 *    after it in the same launch too (fakecuda_graph.c), as the driver does. What it wrote
 *    lasts until the host sets that node, or, under FAKECUDA_DEVICE_UPDATES_LOST, until any host
 *    update of the exec (a driver that keeps no device update past a host one). A bad entry (a node that is not
 * device-updatable or not instantiated, bytes past the kernel's parameters) aborts the process, as the real kernel
 *    traps and the context is lost: a test sees it.
 */
#include "fakecuda_internal.h"
#include "graphs/devpatch_abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u

static char g_module; /* the one module; only its address matters */

static void devpatch_kernel(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    (void)smem;
    const cgj_devpatch_block_t *b = params[0];
    unsigned threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2];
    if (b->n > CGJ_DEVPATCH_ENTRIES || b->n > threads) {
        fprintf(stderr, "fakecuda: cgj_devpatch: %u entries for %u threads\n", b->n, threads);
        abort();
    }
    lock();
    for (uint32_t i = 0; i < b->n; i++) {
        const cgj_devpatch_entry_t *e = &b->e[i];
        fc_node *node = live_get((const void *)(uintptr_t)e->node, K_NODE);
        fc_op *op = node && node->dev_updatable ? devnode_op(node) : NULL;
        if (!op || e->size < 1 || e->size > 8 || e->offset + e->size > op->kern.k->total) {
            fprintf(stderr,
                    "fakecuda: cgj_devpatch: entry %u: node %p, %u bytes at %u: not a device-updatable "
                    "node's parameters\n",
                    i, (void *)(uintptr_t)e->node, e->size, e->offset);
            abort();
        }
        memcpy(args_bytes(op->kern.k, op->kern.argv) + e->offset, &e->value, e->size);
        g_counts.device_updates++;
    }
    unlock();
}

int fakecuda_is_devpatch(const fc_kernel *k)
{
    return k && k->fn == devpatch_kernel;
}

FC_DEFINE(cuModuleLoadData, (CUmodule * module, const void *image))
{
    FAIL_POINT();
    uint32_t magic = 0;
    if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
    memcpy(&magic, image, sizeof magic);
    if (magic != FATBIN_MAGIC) return CUDA_ERROR_NOT_SUPPORTED;
    *module = (CUmodule)(void *)&g_module;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuModuleGetFunction, (CUfunction * f, CUmodule module, const char *name))
{
    FAIL_POINT();
    static CUfunction patch;
    if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
    if (module != (CUmodule)(void *)&g_module) return CUDA_ERROR_INVALID_HANDLE;
    if (strcmp(name, "cgj_devpatch")) return CUDA_ERROR_NOT_FOUND;
    if (!patch) {
        size_t size = sizeof(cgj_devpatch_block_t);
        patch = fakecuda_register_kernel("cgj_devpatch", devpatch_kernel, 1, &size, 0, 0);
    }
    *f = patch;
    return patch ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The kernel node an attribute call names, with the lock held on success (*err CUDA_SUCCESS);
 * only the device-updatable attribute is known. */
static fc_node *attribute_node(CUgraphNode hNode, CUkernelNodeAttrID attr, const void *v, CUresult *err)
{
    *err = !v                                                       ? CUDA_ERROR_INVALID_VALUE
         : attr != CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE ? CUDA_ERROR_NOT_SUPPORTED
                                                                    : CUDA_SUCCESS;
    if (*err != CUDA_SUCCESS) return NULL;
    lock();
    fc_node *node = live_get(hNode, K_NODE);
    *err = !node                                      ? CUDA_ERROR_INVALID_HANDLE
         : node->op.type != CU_GRAPH_NODE_TYPE_KERNEL ? CUDA_ERROR_INVALID_VALUE
                                                      : CUDA_SUCCESS;
    if (*err != CUDA_SUCCESS) unlock();
    return *err == CUDA_SUCCESS ? node : NULL;
}

FC_DEFINE(cuGraphKernelNodeSetAttribute, (CUgraphNode hNode, CUkernelNodeAttrID attr, const CUkernelNodeAttrValue *v))
{
    FAIL_POINT();
    CUresult err;
    fc_node *node = attribute_node(hNode, attr, v, &err);
    if (!node) return err;
    int on = v->deviceUpdatableKernelNode.deviceUpdatable;
    if ((on != 0 && on != 1) || (node->dev_updatable && !on)) err = CUDA_ERROR_INVALID_VALUE; /* no way back */
    else if (on) node->dev_updatable = 1;
    unlock();
    return err;
}

FC_DEFINE(cuGraphKernelNodeGetAttribute, (CUgraphNode hNode, CUkernelNodeAttrID attr, CUkernelNodeAttrValue *v))
{
    FAIL_POINT();
    CUresult err;
    fc_node *node = attribute_node(hNode, attr, v, &err);
    if (!node) return err;
    v->deviceUpdatableKernelNode.deviceUpdatable = node->dev_updatable;
    v->deviceUpdatableKernelNode.devNode = node->dev_updatable ? (CUgraphDeviceNode)(void *)node : NULL;
    unlock();
    return CUDA_SUCCESS;
}
