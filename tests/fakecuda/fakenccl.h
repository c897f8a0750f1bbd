/*
 * fakenccl.h — test-facing API of the fake NCCL (tests/fakecuda/libfakenccl.so; see fakenccl.c).
 */
#ifndef FAKENCCL_H
#define FAKENCCL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FAKENCCL_API __attribute__((visibility("default")))
#else
#define FAKENCCL_API
#endif

struct ncclComm;

/* Collective calls that reached the fake (a call absorbed by a replay never does). */
FAKENCCL_API unsigned long fakenccl_calls(void);
/* Kernels of the fake that ran (eagerly or from a graph). */
FAKENCCL_API unsigned long fakenccl_kernels_run(void);
/* Kernels that ran with a destroyed communicator's state or a stale FIFO entry. */
FAKENCCL_API unsigned long fakenccl_errors(void);
/* 1: each call's kernel takes the call's sequence number and checks it (see fakenccl.c). */
FAKENCCL_API void fakenccl_set_fifo(int on);
/* Kernels of the communicator that ran: its device-side step counter. */
FAKENCCL_API uint64_t fakenccl_steps(struct ncclComm *comm);

#ifdef __cplusplus
}
#endif
#endif /* FAKENCCL_H */
