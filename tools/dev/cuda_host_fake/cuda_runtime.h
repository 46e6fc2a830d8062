/* cuda_runtime.h - a fake of the CUDA runtime calls src/cuda/quantize_host.cu
 * makes, for run.sh: "device" memory is host memory, copies are memcpy,
 * and the FAKE_FAIL-th call (counting from 1) fails. */
#pragma once
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
enum { cudaSuccess = 0 };
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
#define cudaStreamNonBlocking 1
#define cudaHostAllocDefault 0
#define cudaEventDisableTiming 2

extern "C" int fake_call(void); /* 0, or 1 for the call that is to fail */
extern "C" int fake_h2d;        /* host-to-device copies made */

static inline cudaError_t cudaGetDevice(int *d) { *d = 0; return fake_call(); }
static inline cudaError_t cudaSetDevice(int) { return fake_call(); }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned)
{
    *s = malloc(1);
    return fake_call();
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return 0; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return fake_call(); }
static inline cudaError_t cudaHostAlloc(void **p, size_t n, unsigned)
{
    *p = malloc(n);
    return fake_call();
}
static inline cudaError_t cudaFreeHost(void *p) { free(p); return 0; }
static inline cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = malloc(n);
    memset(*p, 0xA5, n); /* never zero by luck */
    return fake_call();
}
static inline cudaError_t cudaFree(void *p) { free(p); return 0; }
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned)
{
    *e = malloc(1);
    return fake_call();
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return 0; }
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return fake_call(); }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return fake_call(); }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k,
                                          cudaStream_t)
{
    fake_h2d += k == cudaMemcpyHostToDevice;
    memcpy(d, s, n);
    return fake_call();
}
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t)
{
    memset(d, v, n);
    return fake_call();
}
