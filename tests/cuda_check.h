/* cuda_check.h - CU(call): a failing CUDA runtime call in a test or a
 * benchmark prints where and why, and exits 1 (shared by tests/test_cuda*.c
 * and bench/gpu_*.cu). */
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

#endif
