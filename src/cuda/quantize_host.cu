/* quantize_host.cu - bfp_cuda_quantize() from host memory to host memory,
 * for callers that include no CUDA header (bfp convert --device cuda). The
 * input goes up in chunks through two pinned buffers, so that reading it
 * (a memory-mapped file: page faults, disk) overlaps the copies; the device
 * buffers grow to the largest tensor seen and are reused. Every CUDA call's
 * status is checked: a failure is BFP_ERR_DEVICE. */
#include "bfp.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_CHUNK ((size_t)8 << 20) /* bytes per pinned buffer */
#define STAGE_ALIGN ((size_t)256)     /* each plane on its own aligned start */

struct bfp_cuda_stage {
    int device;
    cudaStream_t stream;
    void *pinned[2];
    cudaEvent_t done[2];       /* the copy out of pinned[k] has finished */
    void *d_src, *d_planes;    /* codes | scales | meta | tensor scale | counter */
    size_t src_cap, planes_cap;
};

#define CK(call)                                                               \
    do {                                                                       \
        if ((call) != cudaSuccess)                                             \
            return BFP_ERR_DEVICE;                                             \
    } while (0)

static size_t round_up(size_t n) { return (n + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN; }

/* A device buffer of at least n bytes (its contents are not kept). */
static bfp_status grow(void **d, size_t *cap, size_t n)
{
    if (n <= *cap)
        return BFP_OK;
    if (*d)
        CK(cudaFree(*d));
    *d = NULL;
    *cap = 0;
    CK(cudaMalloc(d, n));
    *cap = n;
    return BFP_OK;
}

extern "C" {

void bfp_cuda_stage_free(bfp_cuda_stage *s)
{
    if (!s)
        return;
    if (s->stream) /* nothing may still read the pinned buffers */
        (void)cudaStreamSynchronize(s->stream);
    for (int k = 0; k < 2; k++) {
        if (s->pinned[k])
            (void)cudaFreeHost(s->pinned[k]);
        if (s->done[k])
            (void)cudaEventDestroy(s->done[k]);
    }
    if (s->d_src)
        (void)cudaFree(s->d_src);
    if (s->d_planes)
        (void)cudaFree(s->d_planes);
    if (s->stream)
        (void)cudaStreamDestroy(s->stream);
    free(s);
}

bfp_status bfp_cuda_stage_create(bfp_cuda_stage **out)
{
    if (!out)
        return BFP_ERR_ARG;
    *out = NULL;
    if (!bfp_cuda_available())
        return BFP_ERR_DEVICE;
    bfp_cuda_stage *s = (bfp_cuda_stage *)calloc(1, sizeof *s);
    if (!s)
        return BFP_ERR_NOMEM;
    int ok = cudaGetDevice(&s->device) == cudaSuccess &&
             cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking) == cudaSuccess;
    for (int k = 0; ok && k < 2; k++)
        ok = cudaHostAlloc(&s->pinned[k], STAGE_CHUNK, cudaHostAllocDefault) == cudaSuccess &&
             cudaEventCreateWithFlags(&s->done[k], cudaEventDisableTiming) == cudaSuccess;
    if (!ok) {
        bfp_cuda_stage_free(s);
        return BFP_ERR_DEVICE;
    }
    *out = s;
    return BFP_OK;
}

bfp_status bfp_cuda_quantize_host(bfp_cuda_stage *s, bfp_format fmt, bfp_dtype dtype,
                                  const void *src, size_t rows, size_t cols,
                                  const bfp_options *opts, const bfp_planes *out,
                                  size_t *nonfinite_blocks)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    bfp_plane_sizes sz;
    if (!s || !src || !out || !out->codes || !out->scales)
        return BFP_ERR_ARG;
    if (!f)
        return BFP_ERR_FORMAT;
    if ((f->meta_bytes && !out->meta) || (f->has_tensor_scale && !out->tensor_scale))
        return BFP_ERR_ARG;
    bfp_status st = bfp_plane_sizes_for(fmt, rows, cols, &sz);
    if (st != BFP_OK)
        return st;
    size_t esz = bfp_dtype_size(dtype);
    if (esz == 0)
        return BFP_ERR_ARG;
    if (rows != 0 && cols > SIZE_MAX / esz / rows)
        return BFP_ERR_SHAPE;
    size_t in_bytes = rows * cols * esz;
    size_t o_scales = round_up(sz.codes), o_meta = o_scales + round_up(sz.scales);
    size_t o_ts = o_meta + round_up(sz.meta > 0 ? sz.meta : 1), o_nf = o_ts + STAGE_ALIGN;
    CK(cudaSetDevice(s->device));
    if ((st = grow(&s->d_src, &s->src_cap, in_bytes > 0 ? in_bytes : 1)) != BFP_OK ||
        (st = grow(&s->d_planes, &s->planes_cap, o_nf + STAGE_ALIGN)) != BFP_OK)
        return st;
    unsigned char *dp = (unsigned char *)s->d_planes;
    unsigned long long *d_nf = (unsigned long long *)(dp + o_nf), nf = 0;

    /* up in chunks: the CPU fills one pinned buffer while the other's copy runs */
    const unsigned char *p = (const unsigned char *)src;
    size_t len;
    for (size_t off = 0, k = 0; off < in_bytes; off += len, k ^= 1) {
        len = in_bytes - off < STAGE_CHUNK ? in_bytes - off : STAGE_CHUNK;
        CK(cudaEventSynchronize(s->done[k]));
        memcpy(s->pinned[k], p + off, len);
        CK(cudaMemcpyAsync((unsigned char *)s->d_src + off, s->pinned[k], len,
                           cudaMemcpyHostToDevice, s->stream));
        CK(cudaEventRecord(s->done[k], s->stream));
    }
    CK(cudaMemsetAsync(d_nf, 0, sizeof *d_nf, s->stream));
    bfp_planes d_out = {dp, dp + o_scales, dp + o_meta, (float *)(dp + o_ts)};
    st = bfp_cuda_quantize(fmt, dtype, s->d_src, rows, cols, opts, 0, &d_out, d_nf, s->stream);
    if (st != BFP_OK) {
        CK(cudaStreamSynchronize(s->stream));
        return st;
    }
    CK(cudaMemcpyAsync(out->codes, d_out.codes, sz.codes, cudaMemcpyDeviceToHost, s->stream));
    CK(cudaMemcpyAsync(out->scales, d_out.scales, sz.scales, cudaMemcpyDeviceToHost, s->stream));
    if (f->meta_bytes && sz.meta)
        CK(cudaMemcpyAsync(out->meta, d_out.meta, sz.meta, cudaMemcpyDeviceToHost, s->stream));
    if (f->has_tensor_scale)
        CK(cudaMemcpyAsync(out->tensor_scale, d_out.tensor_scale, sizeof(float),
                           cudaMemcpyDeviceToHost, s->stream));
    CK(cudaMemcpyAsync(&nf, d_nf, sizeof nf, cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    if (nonfinite_blocks)
        *nonfinite_blocks = (size_t)nf;
    return BFP_OK;
}

} /* extern "C" */
