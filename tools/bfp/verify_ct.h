/* verify_ct.h - the compressed-tensors layout of `bfp verify`. */
#ifndef BFP_CLI_VERIFY_CT_H
#define BFP_CLI_VERIFY_CT_H

#include "bfp.h"

#include <stddef.h>
#include <stdint.h>

/**
 * Read module name (NULL: the only one) of the compressed-tensors checkpoint
 * or shard dut as planar planes (malloc'd, taken over by the caller); it
 * must hold fmt at rows x cols. @return 0, or -1 (reported)
 */
int verify_read_ct(const char *dut, const char *name, bfp_format fmt, size_t rows,
                   size_t cols, uint8_t **codes, uint8_t **scales, uint8_t **meta,
                   float *ts);

#endif /* BFP_CLI_VERIFY_CT_H */
