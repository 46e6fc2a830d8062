/*
 * verify_ct.c - `bfp verify --layout compressed-tensors`: one module of a
 * compressed-tensors checkpoint (from `bfp convert`, llm-compressor, ...) as
 * the planes under test.
 */
#include "bfp_ckpt.h"
#include "cli_util.h"
#include "verify_ct.h"

#include <stdlib.h>
#include <string.h>

int verify_read_ct(const char *dut, const char *name, bfp_format fmt, size_t rows,
                   size_t cols, uint8_t **codes, uint8_t **scales, uint8_t **meta,
                   float *ts)
{
    bfp_qtensor q;
    char err[CLI_ERRLEN] = "";
    bfp_status st = bfp_ct_load_qtensor(dut, name, &q, err, sizeof err);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        return -1;
    }
    const bfp_format_info *f = bfp_format_get(q.format), *want = bfp_format_get(fmt);
    if (q.format != fmt || q.rows != rows || q.cols != cols) {
        cli_error("%s%s%s holds %s %zux%zu, not the %s %zux%zu of -f and -s", dut,
                  name ? ": " : "", name ? name : "", f ? f->name : "?", q.rows, q.cols,
                  want ? want->name : "?", rows, cols);
        bfp_qtensor_free(&q);
        return -1;
    }
    *codes = q.codes;
    *scales = q.scales;
    *meta = q.meta;
    *ts = q.tensor_scale;
    return 0;
}
