/*
 * cli_qtensor.c - one quantized tensor from any input the CLI reads planes
 * from: a container of `bfp quantize`, a checkpoint of `bfp convert` (bfp or
 * compressed-tensors layout: its directory or a shard), or a GGUF's MXFP4 /
 * NVFP4 tensor. dequantize and compare share it.
 */
#include "bfp_ckpt.h"
#include "cli_util.h"

#include <string.h>

int cli_is_quantized(const char *path)
{
    return !cli_has_suffix(path, ".gguf") && bfp_ckpt_is_quantized(path);
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
