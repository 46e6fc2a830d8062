/* internal.h - shared by the reference implementation in src/core/. */
#ifndef BFP_INTERNAL_H
#define BFP_INTERNAL_H

#include "bfp.h"
#include "check_args.h"
#include "format_defs.h"
#include "minifloat.h"

#include <stdint.h>
#include <string.h>

/* One quantization call, as the driver validated it. */
typedef struct {
    const bfp_format_info *f;
    bfp_options o;             /* resolved: rounding and scale_mode never DEFAULT */
    bfp_dtype dtype;
    const void *src;
    size_t rows, cols;
    const bfp_planes *out;
    bfp_plane_sizes sz;
    bfp_stats *st;
} bfp_qjob;

/* Per-format implementation: the public row plus the reference functions. */
typedef struct bfp_format_impl {
    bfp_format_info info;
    const bfp_elem_desc *elem;     /* element codec */
    const bfp_elem_desc *bm_elem;  /* MX+/NVFP4+ block-max codec, else NULL */
    int mm_kind;                   /* matmul kind BFP_MM_* (format_defs.h) */
    bfp_status (*quantize)(const bfp_qjob *job);
    /* Decode row r into out[0..cols); never fails (bad bytes give NaN). */
    void (*dequantize_row)(const struct bfp_format_impl *impl,
                           const bfp_const_planes *in, const bfp_plane_sizes *sz,
                           size_t r, size_t cols, float *out);
    /* 1 if block b of row r holds bytes the quantizer can never write. */
    int (*block_is_bad)(const struct bfp_format_impl *impl,
                        const bfp_const_planes *in, const bfp_plane_sizes *sz,
                        size_t r, size_t b, size_t cols);
} bfp_format_impl;

const bfp_format_impl *bfp_impl_get(bfp_format id);

/* bfp_options_check(), then DEFAULT rounding and scale mode resolved; the one
 * rule every path (reference, CPU kernels, CUDA) applies. */
bfp_status bfp_resolve_options(const bfp_format_info *f, const bfp_options *in,
                               bfp_options *out);

/* How the layer above core spreads work over threads (core starts none):
 * threads_for(requested, bytes, units) picks a count, run(n, fn, ctx) calls
 * fn(ctx, t, n) for t in [0, n). */
typedef void (*bfp_task_fn)(void *ctx, int t, int nthreads);
typedef struct {
    int (*threads_for)(int requested, size_t bytes, size_t units);
    void (*run)(int n, bfp_task_fn fn, void *ctx);
} bfp_parallel;

/* bfp_matmul_prepack() with its bands of tiles spread by par (NULL: all on
 * the calling thread); the bytes are the same for any thread count. */
bfp_status bfp_matmul_prepack_par(bfp_format fmt, const bfp_const_planes *w, size_t n,
                                  size_t k, uint8_t *codes, uint8_t *scales, uint8_t *corr,
                                  const bfp_parallel *par);

/* bfp_cuda_weight_pack_host() (matmul_image.c) with the prepack's bands
 * spread by par (NULL: the calling thread); the cpu layer passes its threads. */
bfp_status bfp_wimg_pack(bfp_format fmt, const bfp_const_planes *w, size_t n, size_t k,
                         void *buf, size_t bytes, const bfp_parallel *par);

/* Family entry points (mx.c, mxplus.c, nvfp4.c, hif4.c). */
bfp_status bfp_mx_quantize_ref(const bfp_qjob *job);
void bfp_mx_dequantize_row_ref(const bfp_format_impl *, const bfp_const_planes *,
                               const bfp_plane_sizes *, size_t, size_t, float *);
int bfp_mx_block_is_bad(const bfp_format_impl *, const bfp_const_planes *,
                        const bfp_plane_sizes *, size_t, size_t, size_t);
bfp_status bfp_mxplus_quantize_ref(const bfp_qjob *job);
void bfp_mxplus_dequantize_row_ref(const bfp_format_impl *, const bfp_const_planes *,
                                   const bfp_plane_sizes *, size_t, size_t, float *);
int bfp_mxplus_block_is_bad(const bfp_format_impl *, const bfp_const_planes *,
                            const bfp_plane_sizes *, size_t, size_t, size_t);
bfp_status bfp_nvfp4_quantize_ref(const bfp_qjob *job);
void bfp_nvfp4_dequantize_row_ref(const bfp_format_impl *, const bfp_const_planes *,
                                  const bfp_plane_sizes *, size_t, size_t, float *);
int bfp_nvfp4_block_is_bad(const bfp_format_impl *, const bfp_const_planes *,
                           const bfp_plane_sizes *, size_t, size_t, size_t);
bfp_status bfp_hif4_quantize_ref(const bfp_qjob *job);
void bfp_hif4_dequantize_row_ref(const bfp_format_impl *, const bfp_const_planes *,
                                 const bfp_plane_sizes *, size_t, size_t, float *);
int bfp_hif4_block_is_bad(const bfp_format_impl *, const bfp_const_planes *,
                          const bfp_plane_sizes *, size_t, size_t, size_t);

/* Load row r of the source as float32 (exact for bf16 and f16). */
void bfp_load_row(bfp_dtype dtype, const void *src, size_t cols, size_t r,
                  float *dst);

/* Elements [b*block, min(cols, (b+1)*block)) make block b; n is its length. */
static inline size_t bfp_block_len(size_t cols, size_t block, size_t b)
{
    size_t start = b * block;
    return cols - start < block ? cols - start : block;
}

/* Element i of a row's LSB-first code stream of w-bit codes. */
static inline void bfp_put_code(uint8_t *row, size_t i, int w, unsigned code)
{
    if (w == 8) {
        row[i] = (uint8_t)code;
    } else if (w == 4) {
        uint8_t *p = row + (i >> 1);
        *p = (i & 1) ? (uint8_t)((*p & 0x0F) | (code << 4))
                     : (uint8_t)((*p & 0xF0) | (code & 0x0F));
    } else {
        size_t bit = i * (size_t)w;
        for (int k = 0; k < w; k++, bit++) {
            uint8_t m = (uint8_t)(1u << (bit & 7));
            row[bit >> 3] = (uint8_t)(((code >> k) & 1u) ? (row[bit >> 3] | m)
                                                          : (row[bit >> 3] & ~m));
        }
    }
}

static inline unsigned bfp_get_code(const uint8_t *row, size_t i, int w)
{
    if (w == 8)
        return row[i];
    if (w == 4)
        return (row[i >> 1] >> ((i & 1) * 4)) & 0x0F;
    unsigned code = 0;
    size_t bit = i * (size_t)w;
    for (int k = 0; k < w; k++, bit++)
        code |= (unsigned)((row[bit >> 3] >> (bit & 7)) & 1u) << k;
    return code;
}

/* Random bits for stochastic rounding of element `index` (row*cols + col):
 * splitmix64 at counter index+1 from seed, high 32 bits. Stateless, so any
 * order of evaluation (threads, GPU) gives the same bits. */
static inline uint32_t bfp_sr_bits(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32);
}

static inline float bfp_f32_nan(void)
{
    uint32_t b = 0x7FC00000u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline int bfp_f32_is_finite(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return ((b >> 23) & 0xFF) != 0xFF;
}

static inline int bfp_f32_sign(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return (int)(b >> 31);
}

#endif /* BFP_INTERNAL_H */
