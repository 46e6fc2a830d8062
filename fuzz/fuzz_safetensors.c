/*
 * fuzz_safetensors.c - the safetensors reader (length, JSON header, entries,
 * offsets, data) on any bytes, with no tensor name and with the first
 * bytes' name. Properties: no crash or read past the input; a tensor that
 * loads has exactly the bytes its shape and dtype need.
 */
#include "bfp_io.h"
#include "fuzz_util.h"

static void load(const uint8_t *data, size_t size, const char *name)
{
    bfp_tensor t;
    char err[512] = "";
    if (bfp_safetensors_parse(data, size, name, &t, err, sizeof err) == BFP_OK) {
        FZ_CHECK(t.ndim <= BFP_IO_MAX_DIMS && bfp_tensor_numel(&t) * bfp_dtype_size(t.dtype) ==
                     t.nbytes && t.nbytes <= size,
                 "safetensors: %zu dims, %zu bytes", t.ndim, t.nbytes);
        bfp_tensor_free(&t);
    } else {
        FZ_CHECK(t.data == NULL && err[0] != '\0', "safetensors: failure without a message");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load(data, size, NULL);
    load(data, size, "t");
    load(data, size, "weight");
    return 0;
}
