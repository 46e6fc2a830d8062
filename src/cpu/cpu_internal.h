/* cpu_internal.h - the CPU kernel table shared by dispatch.c and the kernel
 * sets (generic.c, x86_avx2.c, x86_avx512.c).
 *
 * A kernel handles whole blocks of one row segment; dispatch.c validates the
 * call, splits the tensor into row segments (and across threads), computes
 * NVFP4's tensor scale, and feeds a partial last block through the float32
 * kernel from a zero-padded copy. Every kernel gives the reference's bytes
 * bit for bit (tests/test_simd*.c). */
#ifndef BFP_CPU_INTERNAL_H
#define BFP_CPU_INTERNAL_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

#define BFP_CPU_NFMT BFP_FORMAT_ID_LIMIT /* kernel tables are indexed by format id */
#define BFP_CPU_MAXBLOCK 64
#define BFP_CPU_MAX_THREADS 64

/* What a quantize kernel needs besides the data. */
typedef struct {
    const bfp_format_impl *impl;
    float s_enc;               /* NVFP4(+): the tensor encode scale */
} bfp_qparams;

/* What a dequantize kernel needs besides the data. */
typedef struct {
    const bfp_format_impl *impl;
    float s_enc;               /* NVFP4(+) */
    int s_enc_ok;              /* s_enc finite and > 0 (else every block is NaN) */
    int stream;                /* non-temporal stores allowed (large outputs) */
} bfp_dparams;

/* Quantize nblocks full blocks from src (values of the kernel's dtype, any
 * alignment) into codes (the row's bytes from the first block on), scales
 * (scale_bytes per block) and meta (1 byte per block, or NULL); count
 * non-finite and flushed blocks into *st. */
typedef void (*bfp_qkernel)(const bfp_qparams *p, const void *src, size_t nblocks,
                            uint8_t *codes, uint8_t *scales, uint8_t *meta,
                            bfp_stats *st);

/* Decode nblocks blocks into dst (values of the kernel's dtype, any
 * alignment; block * nblocks of them). last_len is the number of real
 * elements of the last block (the block size unless it is a row's partial
 * block, whose padding codes are 0): the block-max index checks use it. */
typedef void (*bfp_dkernel)(const bfp_dparams *p, const uint8_t *codes,
                            const uint8_t *scales, const uint8_t *meta,
                            size_t nblocks, size_t last_len, void *dst);

/* max |x| over the finite values of n values (0 if none). */
typedef float (*bfp_amax_kernel)(const void *src, size_t n);

/* One kernel set. A NULL entry sends the whole call to the reference. */
typedef struct {
    const char *name;
    bfp_qkernel quant[BFP_CPU_NFMT][3];   /* [format][dtype - 1]: f32, bf16, f16 */
    bfp_dkernel dequant[BFP_CPU_NFMT][2]; /* [format][0 f32 | 1 bf16] */
    bfp_amax_kernel amax[3];              /* [dtype - 1] */
} bfp_kernels;

/* Fill k with the portable C kernels (every format and dtype). */
void bfp_cpu_generic_init(bfp_kernels *k);
/* Override entries with AVX2 (+FMA, F16C) / AVX-512 (F, BW, VL) kernels.
 * Call only on a CPU that has them. Return 0 when this build lacks the ISA
 * (the file was compiled without its flags). */
int bfp_cpu_avx2_init(bfp_kernels *k);
int bfp_cpu_avx512_init(bfp_kernels *k);
/* The AVX-512 dequantize kernels (x86_avx512_dequant.c), called by
 * bfp_cpu_avx512_init(). */
int bfp_cpu_avx512_dequant_init(bfp_kernels *k);

/* Kernel sets by ISA, for tests that run every path in one process (the
 * differential fuzz target); the public entry points use the one the CPU
 * and bfp_set_isa() pick. */
enum { BFP_ISA_GENERIC, BFP_ISA_AVX2, BFP_ISA_AVX512, BFP_ISA_COUNT };
/* The table for isa, or NULL when the CPU or this build lacks it. */
const bfp_kernels *bfp_cpu_kernels_for(int isa);
/* bfp_quantize() / bfp_dequantize() through the kernel set k. */
bfp_status bfp_cpu_quantize(const bfp_kernels *k, bfp_format fmt, bfp_dtype dtype,
                            const void *src, size_t rows, size_t cols,
                            const bfp_options *opts, const bfp_planes *out, bfp_stats *stats);
bfp_status bfp_cpu_dequantize(const bfp_kernels *k, bfp_format fmt,
                              const bfp_const_planes *in, size_t rows, size_t cols,
                              bfp_dtype dtype, void *dst);

/* Element value tables (code -> float value at scale 1, NaN codes keep
 * their sign), built by bfp_cpu_generic_init() before any kernel runs. */
const float *bfp_cpu_elem_lut(const bfp_elem_desc *e);
/* For the MX+ element types: 1 per code the quantizer never writes. */
const uint8_t *bfp_cpu_elem_special(const bfp_elem_desc *e);

/* Threads (threads.c); bfp_task_fn is core's (internal.h). */
/* Run fn(ctx, t, n) for t in [0, n): t = 0 on the calling thread, the others
 * on new threads (run on the calling thread if a thread cannot start). */
void bfp_cpu_parallel(int n, bfp_task_fn fn, void *ctx);
/* Threads for a call moving `bytes` bytes: requested > 0 is taken as given
 * (capped); 0 means automatic: 1 below 1 MiB, else up to bfp_set_threads()'s
 * count or the number of online CPUs, at least 512 KiB per thread. Never more than units. */
int bfp_cpu_threads_for(int requested, size_t bytes, size_t units);

#endif /* BFP_CPU_INTERNAL_H */
