/*
 * fuzz_gguf.c - the GGUF reader (magic, version, counts, key/values with
 * nested arrays, tensor infos, alignment, offsets, data) on any bytes:
 * listing, loading a float tensor, loading an MXFP4/NVFP4 tensor as planes.
 * Properties: no crash, hang or read past the input; what is listed lies
 * inside the input; what loads has the sizes its shape needs.
 */
#include "bfp_io.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bfp_gguf_index idx;
    char err[512] = "";
    if (bfp_gguf_list_mem(data, size, &idx, err, sizeof err) != BFP_OK) {
        FZ_CHECK(idx.tensors == NULL && err[0] != '\0', "gguf: failure without a message");
        return 0;
    }
    for (size_t i = 0; i < idx.count; i++) {
        const bfp_gguf_tensor *t = &idx.tensors[i];
        FZ_CHECK(t->offset <= size && t->nbytes <= size - t->offset &&
                     t->offset % idx.alignment == 0 && t->ndim >= 1 &&
                     t->ndim <= BFP_IO_MAX_DIMS,
                 "gguf: tensor %zu at %llu, %llu bytes, in %zu", i,
                 (unsigned long long)t->offset, (unsigned long long)t->nbytes, size);
    }
    bfp_gguf_index_free(&idx);

    bfp_tensor t;
    if (bfp_gguf_parse(data, size, NULL, &t, err, sizeof err) == BFP_OK) {
        FZ_CHECK(bfp_tensor_numel(&t) * bfp_dtype_size(t.dtype) == t.nbytes && t.nbytes <= size,
                 "gguf: float tensor of %zu bytes", t.nbytes);
        bfp_tensor_free(&t);
    }
    bfp_qtensor q;
    if (bfp_gguf_parse_qtensor(data, size, NULL, &q, err, sizeof err) == BFP_OK) {
        FZ_CHECK(q.sizes.codes + q.sizes.scales <= size, "gguf: planes larger than the file");
        if (q.rows * q.cols <= ((size_t)1 << 16)) {
            float *y = fz_alloc(q.rows * q.cols * sizeof *y);
            bfp_const_planes p = bfp_qtensor_planes(&q);
            FZ_CHECK(bfp_dequantize(q.format, &p, q.rows, q.cols, BFP_DTYPE_F32, y) == BFP_OK,
                     "gguf: dequantize");
            free(y);
        }
        bfp_qtensor_free(&q);
    }
    return 0;
}
