/* staging.c — bump allocation of pinned staging buffers from large chunks; see staging.h. */
#include "allocator/staging.h"
#include "base/cgj_base.h"
#include "base/driver.h"
#include "base/log.h"

#include <pthread.h>

#define CHUNK_BYTES (4u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *chunk;
static size_t chunk_used, chunk_size;

void *cgj_staging_alloc(size_t n)
{
    n = (n + 255) & ~(size_t)255;
    pthread_mutex_lock(&lock);
    if (!chunk || chunk_used + n > chunk_size) {
        size_t sz = n > CHUNK_BYTES ? n : CHUNK_BYTES;
        void *p = NULL;
        CUresult r = cgj_drv.r_cuMemHostAlloc ? cgj_drv.r_cuMemHostAlloc(&p, sz, 0)
                                              : CUDA_ERROR_NOT_SUPPORTED;
        if (r != CUDA_SUCCESS) {
            pthread_mutex_unlock(&lock);
            CGJ_LOG(graphs, "pinned staging of %zu bytes refused: %s", sz, cgj_driver_errstr(r));
            return NULL;
        }
        chunk = p; /* the rest of the old chunk is left unused */
        chunk_size = sz;
        chunk_used = 0;
    }
    void *p = chunk + chunk_used;
    chunk_used += n;
    pthread_mutex_unlock(&lock);
    return p;
}
