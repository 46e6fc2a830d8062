/*
 * cli_qtensor.c - one quantized tensor from any input the CLI reads planes
 * from: a container of `bfp quantize`, a checkpoint of `bfp convert` (bfp or
 * compressed-tensors layout: its directory or a shard), or a GGUF's MXFP4 /
 * NVFP4 tensor. dequantize and compare share it.
 */
#include "bfp_ckpt.h"
#include "cli_util.h"

#include <string.h>

/* A GGUF's tensor name (NULL: the file holds MXFP4 / NVFP4 tensors and no
 * float one) is ggml blocks. */
static int gguf_quantized(const char *path, const char *name)
{
    bfp_gguf_index idx;
    char e[8];
    int floats = 0, quants = 0, yes = 0;
    if (bfp_gguf_list(path, &idx, e, sizeof e) != BFP_OK)
        return 0; /* the float loader says what is wrong */
    for (size_t i = 0; i < idx.count; i++) {
        uint32_t ty = idx.tensors[i].ggml_type;
        int q = ty == 39 || ty == 40, f = ty == 0 || ty == 1 || ty == 30;
        if (name && strcmp(idx.tensors[i].name, name) == 0)
            yes = q;
        floats += f;
        quants += q;
    }
    bfp_gguf_index_free(&idx);
    return name ? yes : floats == 0 && quants > 0;
}

int cli_is_quantized(const char *path, const char *name)
{
    if (cli_has_suffix(path, ".gguf"))
        return gguf_quantized(path, name);
    return bfp_ckpt_is_quantized(path);
}

int cli_load_qtensor(const char *path, const char *name, bfp_qtensor *q)
{
    char err[CLI_ERRLEN] = "";
    bfp_status st;
    memset(q, 0, sizeof *q);
    if (cli_has_suffix(path, ".gguf"))
        st = bfp_gguf_load_qtensor(path, name, q, err, sizeof err);
    else if (bfp_ct_is_checkpoint(path))
        st = bfp_ct_load_qtensor(path, name, q, err, sizeof err);
    else
        st = bfp_qtensor_load(path, name, q, err, sizeof err);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        return -1;
    }
    return 0;
}
