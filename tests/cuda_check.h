/* cuda_check.h - CU(call): a failing CUDA runtime call in a test or a
 * benchmark prints where and why, and exits 1; device_nonzero_bytes (shared
 * by tests/test_cuda*.c and bench/gpu_*.cu). */
#ifndef BFP_TEST_CUDA_CHECK_H
#define BFP_TEST_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CU(call)                                                                       \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_),        \
                    __FILE__, __LINE__);                                               \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* nonzero bytes among the first bytes of device memory d (a workspace that
 * the calls must leave zero) */
static inline size_t device_nonzero_bytes(const void *d, size_t bytes)
{
    unsigned char *h = (unsigned char *)malloc(bytes ? bytes : 1);
    CU(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    size_t nz = 0;
    for (size_t i = 0; i < bytes; i++)
        nz += h[i] != 0;
    free(h);
    return nz;
}

#endif
