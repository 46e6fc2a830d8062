/*
 * bfpmodule.h - what the files of bfp._core share (not installed).
 */
#ifndef BFPMODULE_H
#define BFPMODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "bfp.h"

/* Raise bfp._core.BfpError (MemoryError for BFP_ERR_NOMEM) with the message
 * "<msg>: <status string>" and .status / .status_str. Returns NULL. */
PyObject *bfpmod_raise(bfp_status st, const char *msg);

/* (rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads)
 * into *o; -1 with a Python error set. */
int bfpmod_parse_opts(PyObject *t, bfp_options *o);

/* The file functions of bfp._core (bfpmodule_io.c), NULL-terminated. */
extern PyMethodDef bfpmod_io_methods[];

/* The matmul functions of bfp._core (bfpmodule_matmul.c), NULL-terminated. */
extern PyMethodDef bfpmod_matmul_methods[];

/* The grouped (MoE) matmul functions (bfpmodule_grouped.c), NULL-terminated. */
extern PyMethodDef bfpmod_grouped_methods[];

#endif /* BFPMODULE_H */
