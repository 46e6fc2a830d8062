/*
 * tensor_load.c - a dense tensor from a file, the reader picked by the
 * path's extension (.safetensors, .gguf, .npy).
 */
#include "io_internal.h"

bfp_status bfp_tensor_load(const char *path, const char *name, bfp_tensor *out,
                           char *err, size_t errlen)
{
    if (!path || !out)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "bfp_tensor_load: NULL argument");
    if (bfpio_has_ext(path, ".safetensors"))
        return bfp_safetensors_load(path, name, out, err, errlen);
    if (bfpio_has_ext(path, ".gguf"))
        return bfp_gguf_load(path, name, out, err, errlen);
    /* A .npy holds one unnamed tensor: name is ignored, since callers also
     * use it to name their outputs (the CLI's --name). */
    if (bfpio_has_ext(path, ".npy"))
        return bfp_npy_load(path, out, err, errlen);
    return bfpio_fail(BFP_ERR_ARG, err, errlen,
                      "%s: unknown file type (expected .npy, .safetensors or .gguf)",
                      path);
}
