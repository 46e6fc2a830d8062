/*
 * cmd_convert.c - `bfp quantize` (float tensor -> quantized container) and
 * `bfp dequantize` (container -> float tensor with the original shape).
 */
#define _POSIX_C_SOURCE 200809L

#include "bfp_ckpt.h"
#include "cli_util.h"
#include "commands.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char cmd_quantize_usage[] =
    "usage: bfp quantize -f FORMAT [options] [--name TENSOR] INPUT\n"
    "                    OUTPUT.safetensors\n"
    "\n"
    "Quantize a float tensor (.npy, .safetensors or .gguf; f32, f16 or bf16) with\n"
    "the reference model and save the quantized container: a safetensors\n"
    "file of U8 planes (codes, scales, meta) and the NVFP4 tensor scale, with\n"
    "the format, shape and options in its metadata (docs/container.md).\n"
    "Blocks run along the last dimension.\n"
    "\n"
    "  -f, --format FORMAT  format name (see 'bfp formats'), required\n"
    "  --name TENSOR        tensor to read from a .safetensors or .gguf INPUT (needed\n"
    "                       when it holds several); also names the planes\n"
    "                       in OUTPUT (default \"tensor\")\n"
    "  --rounding MODE      rne, away, zero, stochastic (default: the\n"
    "                       format's own: away for hif4, else rne)\n"
    "  --seed N             seed for --rounding stochastic\n"
    "  --scale-mode MODE    MX shared exponent: floor (default), ceil, even,\n"
    "                       rceil\n"
    "  --no-tensor-scale    NVFP4(+): tensor scale 1\n"
    "  --2d                 NVFP4 only: 16x16 tiles share a block scale\n"
    "  --force              replace OUTPUT if it exists\n"
    "  -h, --help           this text\n";

const char cmd_dequantize_usage[] =
    "usage: bfp dequantize [-t f32|bf16|f16] [--name TENSOR]\n"
    "                      INPUT.safetensors|INPUT.gguf OUTPUT.npy|OUTPUT.safetensors\n"
    "\n"
    "Decode a quantized container written by 'bfp quantize' back to a float\n"
    "tensor with the original shape. NaN blocks decode to NaN. A\n"
    "compressed-tensors checkpoint (a directory or shard written by 'bfp\n"
    "convert', --name MODULE) gives that module's weight. A .gguf INPUT\n"
    "gives an MXFP4 or NVFP4 tensor of a llama.cpp model (ggml blocks; NVFP4\n"
    "with tensor scale 1, as ggml stores it).\n"
    "\n"
    "  -t, --dtype DTYPE  output values: f32 (default), bf16, f16 (a bf16\n"
    "                     .npy is stored as '<u2' bit patterns)\n"
    "  --name TENSOR      quantized tensor to read (needed when INPUT holds\n"
    "                     several); also the tensor name in a .safetensors\n"
    "                     OUTPUT (default \"tensor\")\n"
    "  --force            replace OUTPUT if it exists\n"
    "  -h, --help         this text\n";

int cmd_quantize(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        CLI_QUANT_LONGOPTS,
        {"name", required_argument, NULL, OPT_NAME},
        {"force", no_argument, NULL, OPT_FORCE},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    cli_opts co;
    int c, r, rc = CLI_EXIT_ERR;
    char err[CLI_ERRLEN] = "", shape[128];
    bfp_tensor t;
    bfp_qtensor q;
    float *x = NULL, *y = NULL;

    memset(&t, 0, sizeof t);
    memset(&q, 0, sizeof q);
    cli_opts_init(&co);
    while ((c = getopt_long(argc, argv, ":f:h", longopts, NULL)) != -1)
        if ((r = cli_opts_take(&co, c, optarg, "quantize", cmd_quantize_usage, argv)) !=
            CLI_OPT_TAKEN)
            return r;
    const bfp_format fmt = co.fmt;
    const char *name = co.name;
    if (!co.have_fmt) {
        cli_error("quantize needs -f FORMAT (see 'bfp formats')");
        return CLI_EXIT_ERR;
    }
    if (cli_want_args("quantize", argc - optind, 2,
                      "INPUT and OUTPUT.safetensors") != 0)
        return CLI_EXIT_ERR;
    const char *in_path = argv[optind], *out_path = argv[optind + 1];
    const bfp_format_info *f = bfp_format_get(fmt);
    if (cli_quant_opts_check(&co.qo, f) != 0)
        return CLI_EXIT_ERR;
    if (!cli_has_suffix(out_path, ".safetensors")) {
        cli_error("OUTPUT %s must end in .safetensors (the quantized "
                  "container)",
                  out_path);
        return CLI_EXIT_ERR;
    }
    if (cli_check_not_input(in_path, out_path) != 0 ||
        cli_check_output(out_path, co.force) != 0) /* before any work */
        return CLI_EXIT_ERR;

    bfp_status st = bfp_tensor_load(in_path, name, &t, err, sizeof err);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        goto out;
    }
    if (bfp_tensor_numel(&t) == 0) { /* name the file and tensor, not the allocator */
        cli_error("%s: %s%s%s has shape [%s]: a zero dimension leaves nothing "
                  "to quantize", in_path, name ? "tensor '" : "its tensor",
                  name ? name : "", name ? "'" : "",
                  cli_shape_str(t.shape, t.ndim, shape, sizeof shape));
        goto out;
    }
    bfp_stats qs;
    memset(&qs, 0, sizeof qs);
    if (cli_quantize(fmt, &co.qo.opts, t.dtype, t.data, t.ndim, t.shape, &q,
                     &qs) != 0)
        goto out;
    size_t n = q.rows * q.cols;
    if (!(y = cli_dequantize_f32(&q)) || !(x = cli_to_f32(t.dtype, t.data, n)))
        goto out;
    bfp_error_stats es;
    if (cli_error_stats(&q, x, y, &es) != 0)
        goto out;

    st = bfp_qtensor_save(out_path, name, &q, co.force, err, sizeof err);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        goto out;
    }
    if (qs.nonfinite_blocks > 0)
        cli_warn("%zu blocks held NaN/Inf and were stored as NaN blocks",
                 qs.nonfinite_blocks);
    printf("quantized %s (%s %s) to %s: %s, %.3f bits/value", in_path,
           bfp_dtype_name(t.dtype), cli_shape_str(t.shape, t.ndim, shape,
                                                  sizeof shape),
           f->name, out_path, f->bits_per_value);
    if (isfinite(es.sqnr_db))
        printf(", SQNR %.2f dB\n", es.sqnr_db);
    else
        printf(es.sqnr_db > 0 ? ", exact\n" : "\n");
    rc = CLI_EXIT_OK;
out:
    free(x);
    free(y);
    bfp_qtensor_free(&q);
    bfp_tensor_free(&t);
    return rc;
}

int cmd_dequantize(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dtype", required_argument, NULL, 't'},
        {"name", required_argument, NULL, OPT_NAME},
        {"force", no_argument, NULL, OPT_FORCE},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    cli_opts co;
    int c, r, rc = CLI_EXIT_ERR;
    char err[CLI_ERRLEN] = "", shape[128];
    bfp_qtensor q;
    bfp_tensor t;

    memset(&q, 0, sizeof q);
    memset(&t, 0, sizeof t);
    cli_opts_init(&co);
    while ((c = getopt_long(argc, argv, ":t:h", longopts, NULL)) != -1)
        if ((r = cli_opts_take(&co, c, optarg, "dequantize", cmd_dequantize_usage, argv)) !=
            CLI_OPT_TAKEN)
            return r;
    const bfp_dtype dtype = co.dtype;
    const char *name = co.name;
    if (cli_want_args("dequantize", argc - optind, 2,
                      "INPUT.safetensors and OUTPUT") != 0)
        return CLI_EXIT_ERR;
    const char *in_path = argv[optind], *out_path = argv[optind + 1];
    int gguf = cli_has_suffix(in_path, ".gguf");
    int ct = !gguf && bfp_ct_is_checkpoint(in_path);
    if (!gguf && !ct && !cli_has_suffix(in_path, ".safetensors")) {
        cli_error("INPUT %s must be a .safetensors container written by 'bfp "
                  "quantize' or a .gguf model",
                  in_path);
        return CLI_EXIT_ERR;
    }
    int npy = cli_has_suffix(out_path, ".npy");
    if (!npy && !cli_has_suffix(out_path, ".safetensors")) {
        cli_error("OUTPUT %s must end in .npy or .safetensors", out_path);
        return CLI_EXIT_ERR;
    }
    if (cli_check_not_input(in_path, out_path) != 0 ||
        cli_check_output(out_path, co.force) != 0) /* before any work */
        return CLI_EXIT_ERR;

    if (cli_load_qtensor(in_path, name, &q) != 0)
        goto out;
    t.dtype = dtype;
    t.ndim = q.ndim;
    memcpy(t.shape, q.shape, sizeof t.shape);
    t.nbytes = q.rows * q.cols * bfp_dtype_size(dtype);
    if (!(t.data = cli_alloc(t.nbytes, "the dequantized tensor")))
        goto out;
    bfp_const_planes planes = bfp_qtensor_planes(&q);
    bfp_status st = bfp_dequantize(q.format, &planes, q.rows, q.cols, dtype, t.data);
    if (st != BFP_OK) {
        cli_status_error("dequantizing", st);
        goto out;
    }
    if (npy)
        st = bfp_npy_save(out_path, &t, co.force, err, sizeof err);
    else
        st = bfp_safetensors_save(out_path, name ? name : "tensor", &t, co.force,
                                  err, sizeof err);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        goto out;
    }
    printf("dequantized %s (%s %s) to %s: %s\n", in_path,
           bfp_format_get(q.format) ? bfp_format_get(q.format)->name : "?",
           cli_shape_str(q.shape, q.ndim, shape, sizeof shape),
           bfp_dtype_name(dtype), out_path);
    rc = CLI_EXIT_OK;
out:
    free(t.data);
    bfp_qtensor_free(&q);
    return rc;
}
