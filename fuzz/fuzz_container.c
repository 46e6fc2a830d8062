/*
 * fuzz_container.c - the quantized-container reader (safetensors with bfp
 * metadata: format, shape, options, planes) on any bytes; a container that
 * loads is then validated and dequantized. Properties: no crash or read
 * past the input or a plane; the planes have the sizes the format and shape
 * need.
 */
#include "bfp_io.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bfp_qtensor q;
    char err[512] = "";
    if (bfp_qtensor_parse(data, size, NULL, &q, err, sizeof err) != BFP_OK) {
        FZ_CHECK(q.codes == NULL && err[0] != '\0', "container: failure without a message");
        return 0;
    }
    bfp_plane_sizes sz;
    FZ_CHECK(bfp_plane_sizes_for(q.format, q.rows, q.cols, &sz) == BFP_OK &&
                 memcmp(&sz, &q.sizes, sizeof sz) == 0 && sz.codes + sz.scales + sz.meta <= size,
             "container: plane sizes");
    bfp_const_planes p = bfp_qtensor_planes(&q);
    size_t bad, first;
    (void)bfp_validate(q.format, &p, q.rows, q.cols, &bad, &first);
    /* dequantize small ones only: a tiny file may claim a big shape of
     * planes that are all present, but keep each run fast */
    if (q.rows * q.cols <= ((size_t)1 << 16)) {
        float *y = fz_alloc(q.rows * q.cols * sizeof *y);
        FZ_CHECK(bfp_dequantize(q.format, &p, q.rows, q.cols, BFP_DTYPE_F32, y) == BFP_OK,
                 "container: dequantize");
        free(y);
    }
    bfp_qtensor_free(&q);
    return 0;
}
