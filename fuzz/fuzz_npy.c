/*
 * fuzz_npy.c - the .npy reader (header dict, version, shape, data) on any
 * bytes. Properties: no crash or read past the input; a tensor that loads
 * has exactly the bytes its shape and dtype need.
 */
#include "bfp_io.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bfp_tensor t;
    char err[256] = "";
    if (bfp_npy_parse(data, size, &t, err, sizeof err) == BFP_OK) {
        FZ_CHECK(t.ndim <= BFP_IO_MAX_DIMS && bfp_tensor_numel(&t) * bfp_dtype_size(t.dtype) ==
                     t.nbytes && t.nbytes <= size && (t.data || t.nbytes == 0),
                 "npy: %zu dims, %zu bytes", t.ndim, t.nbytes);
        bfp_tensor_free(&t);
    } else {
        FZ_CHECK(t.data == NULL && err[0] != '\0', "npy: failure without a message");
    }
    return 0;
}
