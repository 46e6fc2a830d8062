/*
 * fuzz_safetensors.c - the safetensors reader (length, JSON header, entries,
 * offsets, data) on any bytes, with no tensor name, with the first bytes'
 * name, and all its tensors as a set. Properties: no crash or read past the
 * input; a tensor that loads has exactly the bytes its shape and dtype need.
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

/* Every tensor as a set (a state dict's float file). */
static void load_set(const uint8_t *data, size_t size)
{
    bfp_tensor_set s;
    char err[512] = "";
    if (bfp_safetensors_parse_set(data, size, &s, err, sizeof err) == BFP_OK) {
        for (size_t i = 0; i < s.count; i++) {
            const bfp_tensor *t = &s.tensors[i];
            FZ_CHECK(s.names[i] && t->ndim <= BFP_IO_MAX_DIMS &&
                         bfp_tensor_numel(t) * bfp_dtype_size(t->dtype) == t->nbytes &&
                         t->nbytes <= size,
                     "safetensors set: %zu dims, %zu bytes", t->ndim, t->nbytes);
        }
        bfp_tensor_set_free(&s);
    } else {
        FZ_CHECK(s.count == 0 && s.names == NULL && err[0] != '\0',
                 "safetensors set: failure without a message or with leftovers");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_set(data, size);
    load(data, size, NULL);
    load(data, size, "t");
    load(data, size, "weight");
    return 0;
}
