/* matmul_image.c - the packed GPU weight as one caller-owned buffer: its
 * size, its host image (header, prepacked arrays), and the
 * tuning struct's check. Pure computation: the device side is
 * src/cuda/gemm.cu (bfp_cuda_weight_pack, bfp_cuda_weight_view). */
#include "internal.h"
#include "matmul_image.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

/* header fields (little-endian) */
enum { H_MAGIC = 0, H_VERSION = 4, H_FORMAT = 8, H_FOLD = 12, H_N = 16, H_K = 24, H_BYTES = 32,
       H_TS = 40 };
static const uint8_t MAGIC[4] = {'B', 'F', 'P', 'W'};

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* *off = the section's offset, *at moved past it (aligned); 0 on overflow */
static int place(size_t *at, size_t len, size_t *off)
{
    *off = *at;
    if (len > SIZE_MAX - *at - BFP_WIMG_ALIGN)
        return 0;
    *at += (len + BFP_WIMG_ALIGN - 1) / BFP_WIMG_ALIGN * BFP_WIMG_ALIGN;
    return 1;
}

bfp_status bfp_wimg_layout_get(bfp_format fmt, size_t n, size_t k, bfp_wimg_layout *L)
{
    bfp_status st = bfp_matmul_packed_sizes(fmt, n, k, &L->ps);
    if (st != BFP_OK)
        return st;
    if (n > INT_MAX || k > INT_MAX)
        return BFP_ERR_SHAPE; /* the kernels' int shapes */
    size_t at = BFP_WIMG_ALIGN; /* the header */
    int ok = place(&at, L->ps.codes, &L->codes) && place(&at, L->ps.scales, &L->scales) &&
             place(&at, L->ps.corr, &L->corr);
    L->total = at;
    return ok ? BFP_OK : BFP_ERR_SHAPE;
}

bfp_status bfp_cuda_weight_packed_size(bfp_format fmt, size_t n, size_t k, size_t *bytes)
{
    bfp_wimg_layout L;
    bfp_status st = bfp_wimg_layout_get(fmt, n, k, &L);
    if (st == BFP_OK && !bytes)
        return BFP_ERR_ARG;
    if (st == BFP_OK)
        *bytes = L.total;
    return st;
}

bfp_status bfp_wimg_pack(bfp_format fmt, const bfp_const_planes *w, size_t n, size_t k,
                         void *buf, size_t bytes, const bfp_parallel *par)
{
    bfp_wimg_layout L;
    bfp_status st = bfp_wimg_layout_get(fmt, n, k, &L);
    if (st != BFP_OK)
        return st;
    const bfp_format_info *f = bfp_format_get(fmt);
    if (!w || !w->codes || !w->scales || (f->meta_bytes && !w->meta) ||
        (f->has_tensor_scale && !w->tensor_scale) || !buf || bytes < L.total)
        return BFP_ERR_ARG;
    uint8_t *b = (uint8_t *)buf;
    memset(b, 0, L.total); /* header and section padding */
    st = bfp_matmul_prepack_par(fmt, w, n, k, b + L.codes, b + L.scales,
                                L.ps.corr ? b + L.corr : NULL, par);
    if (st != BFP_OK)
        return st;
    /* MX, MX+: the kernels' operands carry 2^-fold, fold from the largest
     * finite E8M0 code (gemm_fused.cuh) */
    int fold = 0;
    if (fmt == BFP_MXFP4 || fmt == BFP_MXFP4_PLUS) {
        unsigned smax = 0;
        for (size_t i = 0; i < L.ps.scales; i++) {
            unsigned c = b[L.scales + i];
            if (c != 0xFF && c > smax)
                smax = c;
        }
        fold = smax > 128 ? (int)smax - 128 : 0;
    }
    float ts = f->has_tensor_scale ? *w->tensor_scale : 1.0f;
    uint32_t ts_bits;
    memcpy(&ts_bits, &ts, sizeof ts_bits);
    memcpy(b + H_MAGIC, MAGIC, sizeof MAGIC);
    put_u32(b + H_VERSION, BFP_WIMG_VERSION);
    put_u32(b + H_FORMAT, (uint32_t)fmt);
    put_u32(b + H_FOLD, (uint32_t)fold);
    put_u64(b + H_N, n);
    put_u64(b + H_K, k);
    put_u64(b + H_BYTES, L.total);
    put_u32(b + H_TS, ts_bits);
    return BFP_OK;
}

bfp_status bfp_wimg_header_read(const uint8_t *hdr, bfp_format fmt, size_t n, size_t k,
                                size_t bytes, int *mx_fold, float *tensor_scale)
{
    bfp_wimg_layout L;
    if (bfp_wimg_layout_get(fmt, n, k, &L) != BFP_OK || bytes < L.total ||
        memcmp(hdr + H_MAGIC, MAGIC, sizeof MAGIC) != 0 ||
        get_u32(hdr + H_VERSION) != BFP_WIMG_VERSION || get_u32(hdr + H_FORMAT) != (uint32_t)fmt ||
        get_u64(hdr + H_N) != n || get_u64(hdr + H_K) != k || get_u64(hdr + H_BYTES) != L.total ||
        get_u32(hdr + H_FOLD) > 127)
        return BFP_ERR_ARG;
    *mx_fold = (int)get_u32(hdr + H_FOLD);
    uint32_t ts_bits = get_u32(hdr + H_TS);
    memcpy(tensor_scale, &ts_bits, sizeof ts_bits);
    return BFP_OK;
}

bfp_status bfp_cuda_weight_unpack_host(bfp_format fmt, size_t n, size_t k, const void *buf,
                                       size_t bytes, float *w)
{
    bfp_wimg_layout L;
    bfp_status st = bfp_wimg_layout_get(fmt, n, k, &L);
    if (st != BFP_OK)
        return st;
    if (!buf || !w || bytes < L.total)
        return BFP_ERR_ARG;
    const uint8_t *b = (const uint8_t *)buf;
    int fold = 0;
    float ts = 1.0f;
    st = bfp_wimg_header_read(b, fmt, n, k, bytes, &fold, &ts);
    if (st != BFP_OK)
        return st;
    return bfp_matmul_unpack(fmt, b + L.codes, b + L.scales, L.ps.corr ? b + L.corr : NULL, ts,
                             n, k, w);
}

bfp_status bfp_matmul_tuning_check(const bfp_matmul_tuning *t)
{
    if (!t)
        return BFP_OK;
    int ok = t->ctas_per_sm >= 0 && t->ctas_per_sm <= 64 && t->warps_per_sm >= 0 &&
             t->warps_per_sm <= 64 &&
             t->post_max_m >= -1 && t->post_max_m <= 32 &&
             t->wgmma_serial >= 0 && t->wgmma_serial <= 2 &&
             t->gemv_pdl >= -1 && t->gemv_pdl <= 2 &&
             (t->wgmma_consumers == 0 || t->wgmma_consumers == 2 || t->wgmma_consumers == 3) &&
             t->xq_kernel >= 0 && t->xq_kernel <= 2 && t->grouped_kernel >= 0 &&
             t->grouped_kernel <= 3 &&
             t->gemv_split >= 0 && t->gemv_split <= 2 &&
             (t->wgmma_bn == 0 || t->wgmma_bn == 64 || t->wgmma_bn == 128 ||
              (t->wgmma_bn == 256 && t->wgmma_consumers != 3));
    return ok ? BFP_OK : BFP_ERR_ARG;
}
