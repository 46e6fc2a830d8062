/* x86_avx512.c - AVX-512 kernels (placeholder while being written). */
#include "cpu_internal.h"
int bfp_cpu_avx512_init(bfp_kernels *k) { (void)k; return 0; }
