/*
 * bfpmodule.c - bfp._core, the CPython extension over libbfp.
 *
 * A thin layer: every function takes plain Python values and objects that
 * export the buffer protocol (numpy arrays, bytearray, memoryview), checks
 * their sizes against bfp_plane_sizes_for(), releases the GIL and calls the
 * library. The Python package (bfp/__init__.py) does the dtype, axis and
 * torch handling; nothing here needs numpy's C API, so the extension builds
 * without numpy installed.
 *
 * The file functions (bfp.save / bfp.load through libbfp's io layer) are in
 * bfpmodule_io.c, the matmul ones (bfp.torch_ops) in bfpmodule_matmul.c.
 *
 * Every library failure raises bfp._core.BfpError (a ValueError) whose
 * message ends with the library's status string and whose .status attribute
 * is the bfp_status code; BFP_ERR_NOMEM raises MemoryError.
 */
#include "bfpmodule.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PyObject *BfpError; /* bfp._core.BfpError(ValueError) */

/* Raise for a library status with a formatted prefix:
 * "<prefix>: <status string>". Returns NULL. */
static PyObject *raise_status(bfp_status st, const char *fmt, ...)
{
    char prefix[512], msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s: %s", prefix, bfp_status_str(st));
    if (st == BFP_ERR_NOMEM) {
        PyErr_SetString(PyExc_MemoryError, msg);
        return NULL;
    }
    PyObject *exc = PyObject_CallFunction(BfpError, "s", msg);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong((long)st);
    PyObject *text = PyUnicode_FromString(bfp_status_str(st));
    if (!code || !text || PyObject_SetAttrString(exc, "status", code) < 0 ||
        PyObject_SetAttrString(exc, "status_str", text) < 0) {
        Py_XDECREF(code);
        Py_XDECREF(text);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    Py_DECREF(text);
    PyErr_SetObject(BfpError, exc);
    Py_DECREF(exc);
    return NULL;
}

static const bfp_format_info *get_info(int fmt)
{
    const bfp_format_info *f = bfp_format_get((bfp_format)fmt);
    if (!f)
        raise_status(BFP_ERR_FORMAT, "format id %d", fmt);
    return f;
}

static int check_dtype(int dtype)
{
    if (bfp_dtype_size((bfp_dtype)dtype) == 0) {
        raise_status(BFP_ERR_ARG, "dtype code %d", dtype);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- buffers */

/* Up to 6 Py_buffers held for one call, released together. */
typedef struct {
    Py_buffer b[6];
    int n;
} bufset;

static void bufset_release(bufset *s)
{
    for (int i = 0; i < s->n; i++)
        PyBuffer_Release(&s->b[i]);
    s->n = 0;
}

/* Get a C-contiguous buffer of obj (None allowed when optional: returns 1
 * and *p = NULL). need: exact byte size required (SIZE_MAX: any). */
static int get_buf(bufset *s, PyObject *obj, int writable, size_t need,
                   const char *what, int optional, void **p)
{
    *p = NULL;
    if (obj == Py_None) {
        if (optional)
            return 0;
        PyErr_Format(PyExc_TypeError, "%s: a buffer is required, not None", what);
        return -1;
    }
    Py_buffer *b = &s->b[s->n];
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, b, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s: need a C-contiguous%s buffer (numpy array, bytearray), "
                     "got %.100s", what, writable ? " writable" : "",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    s->n++;
    if (need != SIZE_MAX && (size_t)b->len != need) {
        PyErr_Format(PyExc_ValueError, "%s: buffer has %zd bytes, expected %zu",
                     what, b->len, need);
        return -1;
    }
    *p = b->buf;
    return 0;
}

/* ------------------------------------------------------------- options */

/* opts: (rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads) */
static int parse_opts(PyObject *t, bfp_options *o)
{
    int rounding, scale_mode, nots, twod, threads;
    unsigned long long seed;
    bfp_options_init(o);
    if (!PyTuple_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "options must be a tuple");
        return -1;
    }
    if (!PyArg_ParseTuple(t, "iKiiii;options tuple", &rounding, &seed, &scale_mode,
                          &nots, &twod, &threads))
        return -1;
    o->rounding = (bfp_rounding)rounding;
    o->seed = (uint64_t)seed;
    o->scale_mode = (bfp_scale_mode)scale_mode;
    o->nvfp4_no_tensor_scale = nots;
    o->nvfp4_2d = twod;
    o->threads = threads;
    return 0;
}

/* options_check(fmt, opts) -> (status, field, why): bfp_options_check(). */
static PyObject *py_options_check(PyObject *self, PyObject *args)
{
    int fmt;
    PyObject *t;
    bfp_options o;
    bfp_option bad;
    const char *why;
    (void)self;
    if (!PyArg_ParseTuple(args, "iO", &fmt, &t) || parse_opts(t, &o) < 0)
        return NULL;
    bfp_status st = bfp_options_check((bfp_format)fmt, &o, &bad, &why);
    return Py_BuildValue("(iis)", (int)st, (int)bad, why);
}

static PyObject *stats_tuple(const bfp_stats *s)
{
    return Py_BuildValue("(nnn)", (Py_ssize_t)s->blocks,
                         (Py_ssize_t)s->nonfinite_blocks,
                         (Py_ssize_t)s->flushed_blocks);
}

static int sizes_for(int fmt, Py_ssize_t rows, Py_ssize_t cols,
                     bfp_plane_sizes *sz, const char *what)
{
    const bfp_format_info *f = get_info(fmt);
    if (!f)
        return -1;
    if (rows < 0 || cols < 0) {
        raise_status(BFP_ERR_SHAPE, "%s: %s of %zd x %zd", f->name, what, rows, cols);
        return -1;
    }
    bfp_status st = bfp_plane_sizes_for(f->id, (size_t)rows, (size_t)cols, sz);
    if (st != BFP_OK) {
        raise_status(st, "%s: %s of %zd x %zd", f->name, what, rows, cols);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- format table */

/* The options a format accepts (bfp_format_accepts), by the keyword names
 * of bfp.quantize(). */
static PyObject *accepted_options(const bfp_format_info *f)
{
    static const struct {
        bfp_option opt;
        const char *name;
    } opts[] = {
        {BFP_OPT_ROUNDING, "rounding"},
        {BFP_OPT_SCALE_MODE, "scale_mode"},
        {BFP_OPT_NO_TENSOR_SCALE, "nvfp4_no_tensor_scale"},
        {BFP_OPT_2D, "nvfp4_2d"},
    };
    PyObject *t = PyTuple_New(0);
    for (size_t i = 0; t && i < sizeof opts / sizeof opts[0]; i++) {
        if (!bfp_format_accepts(f->id, opts[i].opt))
            continue;
        PyObject *name = PyUnicode_FromString(opts[i].name);
        if (!name || _PyTuple_Resize(&t, PyTuple_GET_SIZE(t) + 1) < 0) {
            Py_XDECREF(name);
            Py_XDECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, PyTuple_GET_SIZE(t) - 1, name);
    }
    return t;
}

static PyObject *info_dict(const bfp_format_info *f)
{
    PyObject *opts = accepted_options(f);
    if (!opts)
        return NULL;
    PyObject *d = Py_BuildValue(
        "{s:i,s:s,s:s,s:i,s:i,s:s,s:s,s:i,s:i,s:O,s:d,s:d,s:s,s:i,s:N,s:O,s:O}",
        "id", (int)f->id, "name", f->name, "family", bfp_family_name(f->family),
        "block", f->block, "elem_bits", f->elem_bits, "elem", bfp_elem_name(f->elem),
        "scale", bfp_scale_name(f->scale), "scale_bytes", f->scale_bytes,
        "meta_bytes", f->meta_bytes, "has_tensor_scale",
        f->has_tensor_scale ? Py_True : Py_False, "bits_per_value",
        f->bits_per_value, "max_value", f->max_value, "description", f->description,
        "default_rounding", (int)f->default_rounding, "options", opts, "matmul",
        f->matmul ? Py_True : Py_False, "cuda", f->cuda ? Py_True : Py_False);
    return d;
}

static PyObject *py_formats(PyObject *self, PyObject *noargs)
{
    int n = bfp_format_count();
    PyObject *list = PyList_New(n);
    if (!list)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *d = info_dict(bfp_format_at(i));
        if (!d) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, d);
    }
    return list;
}

static PyObject *py_format_id(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    bfp_format id;
    if (!name)
        return NULL;
    if (bfp_format_from_name(name, &id) != BFP_OK) {
        /* List the names so the message says what would have worked. */
        char known[1024] = "";
        size_t len = 0;
        for (int i = 0; i < bfp_format_count() && len < sizeof known; i++)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s",
                                    i ? ", " : "", bfp_format_at(i)->name);
        return raise_status(BFP_ERR_FORMAT, "format '%.100s' is not one of %s",
                            name, known);
    }
    return PyLong_FromLong((long)id);
}

static PyObject *py_plane_sizes(PyObject *self, PyObject *args)
{
    int fmt;
    Py_ssize_t rows, cols;
    bfp_plane_sizes sz;
    if (!PyArg_ParseTuple(args, "inn", &fmt, &rows, &cols))
        return NULL;
    if (sizes_for(fmt, rows, cols, &sz, "tensor") < 0)
        return NULL;
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n}", "blocks_per_row",
                         (Py_ssize_t)sz.blocks_per_row, "code_row_bytes",
                         (Py_ssize_t)sz.code_row_bytes, "codes",
                         (Py_ssize_t)sz.codes, "scales", (Py_ssize_t)sz.scales,
                         "meta", (Py_ssize_t)sz.meta, "tensor_scale",
                         (Py_ssize_t)sz.tensor_scale);
}

/* ------------------------------------------------------------- quantize */

/* quantize(fmt, dtype, src, rows, cols, opts, codes, scales, meta, tscale)
 * -> (blocks, nonfinite_blocks, flushed_blocks). Planes are writable
 * buffers of exactly the plane sizes; meta / tscale None when unused. */
static PyObject *py_quantize(PyObject *self, PyObject *args)
{
    int fmt, dtype;
    Py_ssize_t rows, cols;
    PyObject *src_o, *opts_o, *codes_o, *scales_o, *meta_o, *ts_o;
    bfp_options o;
    bfp_plane_sizes sz;
    bufset s = {.n = 0};
    void *src, *codes, *scales, *meta, *ts;
    bfp_stats stats;

    if (!PyArg_ParseTuple(args, "iiOnnOOOOO", &fmt, &dtype, &src_o, &rows, &cols,
                          &opts_o, &codes_o, &scales_o, &meta_o, &ts_o))
        return NULL;
    const bfp_format_info *f = get_info(fmt);
    if (!f || check_dtype(dtype) < 0 || parse_opts(opts_o, &o) < 0 ||
        sizes_for(fmt, rows, cols, &sz, "quantize") < 0)
        return NULL;
    size_t nsrc = (size_t)rows * (size_t)cols * bfp_dtype_size((bfp_dtype)dtype);
    if (get_buf(&s, src_o, 0, nsrc, "source", 0, &src) < 0 ||
        get_buf(&s, codes_o, 1, sz.codes, "codes plane", 0, &codes) < 0 ||
        get_buf(&s, scales_o, 1, sz.scales, "scales plane", 0, &scales) < 0 ||
        get_buf(&s, meta_o, 1, sz.meta, "meta plane", sz.meta == 0, &meta) < 0 ||
        get_buf(&s, ts_o, 1, 4, "tensor_scale", !f->has_tensor_scale, &ts) < 0) {
        bufset_release(&s);
        return NULL;
    }
    bfp_planes out = {codes, scales, meta, ts};
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_quantize(f->id, (bfp_dtype)dtype, src, (size_t)rows, (size_t)cols,
                      &o, &out, &stats);
    Py_END_ALLOW_THREADS
    bufset_release(&s);
    if (st != BFP_OK)
        return raise_status(st, "%s: quantize %zd x %zd %s", f->name, rows, cols,
                            bfp_dtype_name((bfp_dtype)dtype));
    return stats_tuple(&stats);
}

/* dequantize(fmt, codes, scales, meta, tscale, rows, cols, dtype, dst) */
static PyObject *py_dequantize(PyObject *self, PyObject *args)
{
    int fmt, dtype;
    Py_ssize_t rows, cols;
    PyObject *codes_o, *scales_o, *meta_o, *ts_o, *dst_o;
    bfp_plane_sizes sz;
    bufset s = {.n = 0};
    void *codes, *scales, *meta, *ts, *dst;

    if (!PyArg_ParseTuple(args, "iOOOOnniO", &fmt, &codes_o, &scales_o, &meta_o,
                          &ts_o, &rows, &cols, &dtype, &dst_o))
        return NULL;
    const bfp_format_info *f = get_info(fmt);
    if (!f || check_dtype(dtype) < 0 || sizes_for(fmt, rows, cols, &sz, "dequantize") < 0)
        return NULL;
    size_t ndst = (size_t)rows * (size_t)cols * bfp_dtype_size((bfp_dtype)dtype);
    if (get_buf(&s, codes_o, 0, sz.codes, "codes plane", 0, &codes) < 0 ||
        get_buf(&s, scales_o, 0, sz.scales, "scales plane", 0, &scales) < 0 ||
        get_buf(&s, meta_o, 0, sz.meta, "meta plane", sz.meta == 0, &meta) < 0 ||
        get_buf(&s, ts_o, 0, 4, "tensor_scale", !f->has_tensor_scale, &ts) < 0 ||
        get_buf(&s, dst_o, 1, ndst, "destination", 0, &dst) < 0) {
        bufset_release(&s);
        return NULL;
    }
    bfp_const_planes in = {codes, scales, meta, ts};
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_dequantize(f->id, &in, (size_t)rows, (size_t)cols, (bfp_dtype)dtype, dst);
    Py_END_ALLOW_THREADS
    bufset_release(&s);
    if (st != BFP_OK)
        return raise_status(st, "%s: dequantize %zd x %zd", f->name, rows, cols);
    Py_RETURN_NONE;
}

/* fake_quant(fmt, dtype, src, rows, cols, opts, out_dtype, dst) -> stats:
 * quantize then dequantize with temporary planes, in one call. */
static PyObject *py_fake_quant(PyObject *self, PyObject *args)
{
    int fmt, dtype, out_dtype;
    Py_ssize_t rows, cols;
    PyObject *src_o, *opts_o, *dst_o;
    bfp_options o;
    bfp_plane_sizes sz;
    bufset s = {.n = 0};
    void *src, *dst;
    bfp_stats stats;

    if (!PyArg_ParseTuple(args, "iiOnnOiO", &fmt, &dtype, &src_o, &rows, &cols,
                          &opts_o, &out_dtype, &dst_o))
        return NULL;
    const bfp_format_info *f = get_info(fmt);
    if (!f || check_dtype(dtype) < 0 || check_dtype(out_dtype) < 0 ||
        parse_opts(opts_o, &o) < 0 || sizes_for(fmt, rows, cols, &sz, "fake_quant") < 0)
        return NULL;
    size_t n = (size_t)rows * (size_t)cols;
    if (get_buf(&s, src_o, 0, n * bfp_dtype_size((bfp_dtype)dtype), "source", 0, &src) < 0 ||
        get_buf(&s, dst_o, 1, n * bfp_dtype_size((bfp_dtype)out_dtype), "destination", 0,
                &dst) < 0) {
        bufset_release(&s);
        return NULL;
    }
    bfp_status st = BFP_ERR_NOMEM;
    float ts = 1.0f;
    uint8_t *codes, *scales, *meta = NULL;
    Py_BEGIN_ALLOW_THREADS
    codes = malloc(sz.codes ? sz.codes : 1);
    scales = malloc(sz.scales ? sz.scales : 1);
    if (sz.meta)
        meta = malloc(sz.meta);
    if (codes && scales && (meta || !sz.meta)) {
        bfp_planes out = {codes, scales, meta, &ts};
        st = bfp_quantize(f->id, (bfp_dtype)dtype, src, (size_t)rows, (size_t)cols, &o,
                          &out, &stats);
        if (st == BFP_OK) {
            bfp_const_planes in = {codes, scales, meta, &ts};
            st = bfp_dequantize(f->id, &in, (size_t)rows, (size_t)cols,
                                (bfp_dtype)out_dtype, dst);
        }
    }
    free(codes);
    free(scales);
    free(meta);
    Py_END_ALLOW_THREADS
    bufset_release(&s);
    if (st != BFP_OK)
        return raise_status(st, "%s: fake_quant %zd x %zd %s", f->name, rows, cols,
                            bfp_dtype_name((bfp_dtype)dtype));
    return stats_tuple(&stats);
}

/* validate(fmt, codes, scales, meta, tscale, rows, cols) -> (bad, first_bad|-1) */
static PyObject *py_validate(PyObject *self, PyObject *args)
{
    int fmt;
    Py_ssize_t rows, cols;
    PyObject *codes_o, *scales_o, *meta_o, *ts_o;
    bfp_plane_sizes sz;
    bufset s = {.n = 0};
    void *codes, *scales, *meta, *ts;

    if (!PyArg_ParseTuple(args, "iOOOOnn", &fmt, &codes_o, &scales_o, &meta_o, &ts_o,
                          &rows, &cols))
        return NULL;
    const bfp_format_info *f = get_info(fmt);
    if (!f || sizes_for(fmt, rows, cols, &sz, "validate") < 0)
        return NULL;
    if (get_buf(&s, codes_o, 0, sz.codes, "codes plane", 0, &codes) < 0 ||
        get_buf(&s, scales_o, 0, sz.scales, "scales plane", 0, &scales) < 0 ||
        get_buf(&s, meta_o, 0, sz.meta, "meta plane", sz.meta == 0, &meta) < 0 ||
        get_buf(&s, ts_o, 0, 4, "tensor_scale", !f->has_tensor_scale, &ts) < 0) {
        bufset_release(&s);
        return NULL;
    }
    bfp_const_planes in = {codes, scales, meta, ts};
    size_t bad = 0, first = SIZE_MAX;
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_validate(f->id, &in, (size_t)rows, (size_t)cols, &bad, &first);
    Py_END_ALLOW_THREADS
    bufset_release(&s);
    if (st != BFP_OK && st != BFP_ERR_DATA)
        return raise_status(st, "%s: validate %zd x %zd", f->name, rows, cols);
    return Py_BuildValue("(nn)", (Py_ssize_t)bad,
                         first == SIZE_MAX ? (Py_ssize_t)-1 : (Py_ssize_t)first);
}

/* ------------------------------------------------------------- error stats */


/* error_stats(x, y, rows, cols, block) -> dict. x, y: float32 buffers of
 * rows*cols values; block 0 skips bm_share (NaN). */
static PyObject *py_error_stats(PyObject *self, PyObject *args)
{
    PyObject *x_o, *y_o, *codes_o = Py_None, *scales_o = Py_None, *meta_o = Py_None,
             *ts_o = Py_None;
    Py_ssize_t rows, cols, block;
    int fmt = 0;
    bufset s = {.n = 0};
    void *x, *y, *codes = NULL, *scales = NULL, *meta = NULL, *ts = NULL;
    bfp_error_stats es;
    bfp_plane_sizes sz;
    double share = NAN;

    /* with the planes (fmt > 0): bfp_error_stats_quantized, saturated too */
    if (!PyArg_ParseTuple(args, "OOnnn|iOOOO", &x_o, &y_o, &rows, &cols, &block, &fmt,
                          &codes_o, &scales_o, &meta_o, &ts_o))
        return NULL;
    if (rows < 0 || cols < 0 || block < 0) {
        PyErr_SetString(PyExc_ValueError, "error_stats: negative size");
        return NULL;
    }
    const bfp_format_info *f = fmt ? get_info(fmt) : NULL;
    if (fmt && (!f || sizes_for(fmt, rows, cols, &sz, "error_stats") < 0))
        return NULL;
    size_t n = (size_t)rows * (size_t)cols;
    if (get_buf(&s, x_o, 0, n * 4, "reference", 0, &x) < 0 ||
        get_buf(&s, y_o, 0, n * 4, "reconstruction", 0, &y) < 0 ||
        (f && (get_buf(&s, codes_o, 0, sz.codes, "codes plane", 0, &codes) < 0 ||
               get_buf(&s, scales_o, 0, sz.scales, "scales plane", 0, &scales) < 0 ||
               get_buf(&s, meta_o, 0, sz.meta, "meta plane", sz.meta == 0, &meta) < 0 ||
               get_buf(&s, ts_o, 0, 4, "tensor_scale", !f->has_tensor_scale, &ts) < 0))) {
        bufset_release(&s);
        return NULL;
    }
    bfp_status st = BFP_OK;
    bfp_const_planes in = {codes, scales, meta, ts};
    Py_BEGIN_ALLOW_THREADS
    if (f)
        st = bfp_error_stats_quantized(f->id, &in, (size_t)rows, (size_t)cols, x, y, &es);
    else
        bfp_error_stats_f32(x, y, n, &es);
    if (block > 0)
        share = bfp_block_max_error_share(x, y, (size_t)rows, (size_t)cols, (size_t)block);
    Py_END_ALLOW_THREADS
    bufset_release(&s);
    if (st != BFP_OK)
        return raise_status(st, "%s: error_stats %zd x %zd", f->name, rows, cols);
    PyObject *d = Py_BuildValue(
        "{s:n,s:n,s:d,s:d,s:d,s:d,s:d,s:d,s:n,s:n}", "count", (Py_ssize_t)es.count, "nonzero",
        (Py_ssize_t)es.nonzero, "rmse", es.rmse, "sqnr_db", es.sqnr_db, "max_rel_err",
        es.max_rel_err, "mean_rel_err", es.mean_rel_err, "max_abs_err", es.max_abs_err,
        "bm_share", share, "skipped_input", (Py_ssize_t)es.skipped_input, "skipped_output",
        (Py_ssize_t)es.skipped_output);
    if (d && f) {
        PyObject *v = PyLong_FromSize_t(es.saturated);
        if (!v || PyDict_SetItemString(d, "saturated", v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

/* ------------------------------------------------------------- verify */

static PyObject *error_stats_dict(const bfp_error_stats *es)
{
    return Py_BuildValue("{s:n,s:n,s:d,s:d,s:d,s:d,s:d}", "count",
                         (Py_ssize_t)es->count, "nonzero", (Py_ssize_t)es->nonzero,
                         "rmse", es->rmse, "sqnr_db", es->sqnr_db, "max_rel_err",
                         es->nonzero ? es->max_rel_err : NAN, "mean_rel_err",
                         es->nonzero ? es->mean_rel_err : NAN, "max_abs_err",
                         es->max_abs_err);
}

/* One mismatch as a tuple: (plane, row, block, elem|None, col|None,
 * input|None, expected, received, expected_value, received_value, cause). */
static PyObject *mismatch_tuple(const bfp_verify_mismatch *m)
{
    int codes = m->plane == BFP_PLANE_CODES;
    PyObject *elem = codes ? PyLong_FromSize_t(m->elem) : Py_NewRef(Py_None);
    PyObject *col = codes ? PyLong_FromSize_t(m->col) : Py_NewRef(Py_None);
    PyObject *input = codes ? PyFloat_FromDouble((double)m->input) : Py_NewRef(Py_None);
    PyObject *t = NULL;
    if (elem && col && input)
        t = Py_BuildValue("(snnOOOkkdds)", bfp_plane_name(m->plane), (Py_ssize_t)m->row,
                          (Py_ssize_t)m->block, elem, col, input,
                          (unsigned long)m->expected, (unsigned long)m->received,
                          m->expected_value, m->received_value,
                          bfp_verify_cause_name(m->cause));
    Py_XDECREF(elem);
    Py_XDECREF(col);
    Py_XDECREF(input);
    return t;
}

static PyObject *verify_result(const bfp_verify_report *r,
                               const bfp_verify_mismatch *mm)
{
    PyObject *causes = PyDict_New(), *list = PyList_New((Py_ssize_t)r->recorded);
    PyObject *ref_err = NULL, *dut_err = NULL, *out = NULL;
    if (!causes || !list)
        goto done;
    for (int c = 0; c < BFP_VERIFY_NCAUSES; c++) {
        if (!r->cause_count[c])
            continue;
        PyObject *v = Py_BuildValue("(ns)", (Py_ssize_t)r->cause_count[c],
                                    bfp_verify_cause_hint((bfp_verify_cause)c));
        if (!v || PyDict_SetItemString(causes, bfp_verify_cause_name((bfp_verify_cause)c),
                                       v) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    for (size_t i = 0; i < r->recorded; i++) {
        PyObject *t = mismatch_tuple(&mm[i]);
        if (!t)
            goto done;
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    ref_err = r->have_error_stats ? error_stats_dict(&r->ref_error) : Py_NewRef(Py_None);
    dut_err = r->have_error_stats ? error_stats_dict(&r->dut_error) : Py_NewRef(Py_None);
    if (!ref_err || !dut_err)
        goto done;
    out = Py_BuildValue(
        "{s:O,s:n,s:n,s:n,s:n,s:n,s:n,s:O,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:O,s:O,s:O,s:O}",
        "identical", r->identical ? Py_True : Py_False,
        "codes_total", (Py_ssize_t)r->codes_total, "codes_differ", (Py_ssize_t)r->codes_differ,
        "scales_total", (Py_ssize_t)r->scales_total,
        "scales_differ", (Py_ssize_t)r->scales_differ,
        "meta_total", (Py_ssize_t)r->meta_total, "meta_differ", (Py_ssize_t)r->meta_differ,
        "tensor_scale_differs", r->tensor_scale_differs ? Py_True : Py_False,
        "blocks_total", (Py_ssize_t)r->blocks_total,
        "blocks_differ", (Py_ssize_t)r->blocks_differ,
        "padding_rows_differ", (Py_ssize_t)r->padding_rows_differ,
        "mismatch_count", (Py_ssize_t)r->mismatches, "recorded", (Py_ssize_t)r->recorded,
        "ref_nan_blocks", (Py_ssize_t)r->ref_nan_blocks,
        "dut_nan_blocks", (Py_ssize_t)r->dut_nan_blocks, "causes", causes,
        "mismatches", list, "ref_error", ref_err, "dut_error", dut_err);
done:
    Py_XDECREF(causes);
    Py_XDECREF(list);
    Py_XDECREF(ref_err);
    Py_XDECREF(dut_err);
    return out;
}

/* verify(fmt, dtype, src, rows, cols, opts, codes, scales, meta, tscale,
 * max_mismatches) -> dict. Quantizes src with bfp_quantize_ref() and
 * compares the DUT planes (read-only buffers of the plane sizes; meta /
 * tscale None when the format has none) with bfp_verify(). */
static PyObject *py_verify(PyObject *self, PyObject *args)
{
    int fmt, dtype;
    Py_ssize_t rows, cols, maxm;
    PyObject *src_o, *opts_o, *codes_o, *scales_o, *meta_o, *ts_o;
    bfp_options o;
    bfp_plane_sizes sz;
    bufset s = {.n = 0};
    void *src, *codes, *scales, *meta, *ts;

    if (!PyArg_ParseTuple(args, "iiOnnOOOOOn", &fmt, &dtype, &src_o, &rows, &cols,
                          &opts_o, &codes_o, &scales_o, &meta_o, &ts_o, &maxm))
        return NULL;
    const bfp_format_info *f = get_info(fmt);
    if (!f || check_dtype(dtype) < 0 || parse_opts(opts_o, &o) < 0 ||
        sizes_for(fmt, rows, cols, &sz, "verify") < 0)
        return NULL;
    if (maxm < 0) {
        PyErr_SetString(PyExc_ValueError, "verify: max_mismatches must be >= 0");
        return NULL;
    }
    size_t nsrc = (size_t)rows * (size_t)cols * bfp_dtype_size((bfp_dtype)dtype);
    if (get_buf(&s, src_o, 0, nsrc, "source", 0, &src) < 0 ||
        get_buf(&s, codes_o, 0, sz.codes, "DUT codes plane", 0, &codes) < 0 ||
        get_buf(&s, scales_o, 0, sz.scales, "DUT scales plane", 0, &scales) < 0 ||
        get_buf(&s, meta_o, 0, sz.meta, "DUT meta plane", sz.meta == 0, &meta) < 0 ||
        get_buf(&s, ts_o, 0, 4, "DUT tensor_scale", !f->has_tensor_scale, &ts) < 0) {
        bufset_release(&s);
        return NULL;
    }
    /* No more recorded mismatches than there are entries. */
    size_t entries = sz.codes * 8 / (f->elem_bits ? (size_t)f->elem_bits : 1) +
                     sz.scales + sz.meta + 1;
    size_t nmm = (size_t)maxm < entries ? (size_t)maxm : entries;
    bfp_status st = BFP_ERR_NOMEM;
    float ref_ts = 1.0f;
    uint8_t *rc, *rs, *rm = NULL;
    bfp_verify_mismatch *mm;
    bfp_verify_report rep;
    memset(&rep, 0, sizeof rep);
    Py_BEGIN_ALLOW_THREADS
    rc = malloc(sz.codes ? sz.codes : 1);
    rs = malloc(sz.scales ? sz.scales : 1);
    if (sz.meta)
        rm = malloc(sz.meta);
    mm = malloc((nmm ? nmm : 1) * sizeof *mm);
    if (rc && rs && (rm || !sz.meta) && mm) {
        bfp_planes ref = {rc, rs, rm, &ref_ts};
        st = bfp_quantize_ref(f->id, (bfp_dtype)dtype, src, (size_t)rows, (size_t)cols,
                              &o, &ref, NULL);
        if (st == BFP_OK) {
            bfp_const_planes cref = {rc, rs, rm, f->has_tensor_scale ? &ref_ts : NULL};
            bfp_const_planes dut = {codes, scales, meta, ts};
            st = bfp_verify(f->id, (size_t)rows, (size_t)cols, (bfp_dtype)dtype, src,
                            &cref, &dut, mm, nmm, &rep);
        }
    }
    free(rc);
    free(rs);
    free(rm);
    Py_END_ALLOW_THREADS
    bufset_release(&s);
    if (st != BFP_OK) {
        free(mm);
        return raise_status(st, "%s: verify %zd x %zd %s", f->name, rows, cols,
                            bfp_dtype_name((bfp_dtype)dtype));
    }
    PyObject *res = verify_result(&rep, mm);
    free(mm);
    return res;
}

/* ------------------------------------------------------------- GPU */

/* cuda_quantize(fmt, dtype, src_ptr, rows, cols, opts, codes_ptr, scales_ptr,
 * meta_ptr, ts_ptr, stream_ptr): device pointers as integers (0 = none). */
static PyObject *py_cuda_quantize(PyObject *self, PyObject *args)
{
    int fmt, dtype;
    Py_ssize_t rows, cols;
    PyObject *opts_o;
    unsigned long long src, codes, scales, meta, ts, stream;
    bfp_options o;
    bfp_plane_sizes sz;
    if (!PyArg_ParseTuple(args, "iiKnnOKKKKK", &fmt, &dtype, &src, &rows, &cols,
                          &opts_o, &codes, &scales, &meta, &ts, &stream))
        return NULL;
    const bfp_format_info *f = get_info(fmt);
    if (!f || check_dtype(dtype) < 0 || parse_opts(opts_o, &o) < 0 ||
        sizes_for(fmt, rows, cols, &sz, "cuda_quantize") < 0)
        return NULL;
    bfp_planes out = {(uint8_t *)(uintptr_t)codes, (uint8_t *)(uintptr_t)scales,
                      (uint8_t *)(uintptr_t)meta, (float *)(uintptr_t)ts};
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_quantize(f->id, (bfp_dtype)dtype, (const void *)(uintptr_t)src,
                           (size_t)rows, (size_t)cols, &o, 0, &out, NULL,
                           (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        return raise_status(st, "%s: cuda_quantize %zd x %zd", f->name, rows, cols);
    Py_RETURN_NONE;
}

/* cuda_dequantize(fmt, codes_ptr, scales_ptr, meta_ptr, ts_ptr, rows, cols,
 * dtype, dst_ptr, stream_ptr) */
static PyObject *py_cuda_dequantize(PyObject *self, PyObject *args)
{
    int fmt, dtype;
    Py_ssize_t rows, cols;
    unsigned long long codes, scales, meta, ts, dst, stream;
    bfp_plane_sizes sz;
    if (!PyArg_ParseTuple(args, "iKKKKnniKK", &fmt, &codes, &scales, &meta, &ts, &rows,
                          &cols, &dtype, &dst, &stream))
        return NULL;
    const bfp_format_info *f = get_info(fmt);
    if (!f || check_dtype(dtype) < 0 || sizes_for(fmt, rows, cols, &sz, "cuda_dequantize") < 0)
        return NULL;
    bfp_const_planes in = {(const uint8_t *)(uintptr_t)codes,
                           (const uint8_t *)(uintptr_t)scales,
                           (const uint8_t *)(uintptr_t)meta,
                           (const float *)(uintptr_t)ts};
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_dequantize(f->id, &in, (size_t)rows, (size_t)cols, (bfp_dtype)dtype,
                             (void *)(uintptr_t)dst, (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        return raise_status(st, "%s: cuda_dequantize %zd x %zd", f->name, rows, cols);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------- shared */

/* For bfpmodule_io.c (declared in bfpmodule.h). */
PyObject *bfpmod_raise(bfp_status st, const char *msg)
{
    return raise_status(st, "%s", msg);
}

int bfpmod_parse_opts(PyObject *t, bfp_options *o)
{
    return parse_opts(t, o);
}

/* ------------------------------------------------------------- misc */

static PyObject *py_version(PyObject *self, PyObject *noargs)
{
    return PyUnicode_FromString(bfp_version());
}

static PyObject *py_isa(PyObject *self, PyObject *noargs)
{
    return PyUnicode_FromString(bfp_isa());
}

static PyObject *py_set_isa(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    bfp_status st = bfp_set_isa(name);
    if (st != BFP_OK)
        return raise_status(st, "isa '%s' is not one of generic, avx2, avx512, auto", name);
    Py_RETURN_NONE;
}

static PyObject *py_set_threads(PyObject *self, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    bfp_status st = n > INT_MAX ? BFP_ERR_ARG : bfp_set_threads((int)n);
    if (st != BFP_OK)
        return raise_status(st, "threads %ld is not a thread count (>= 0; 0 = automatic)", n);
    Py_RETURN_NONE;
}

/* The module's front-end duty: pass BFP_ISA and BFP_THREADS to the library
 * (which reads no environment). A bad value fails the import. */
static int apply_environment(void)
{
    const char *isa = getenv("BFP_ISA");
    if (isa && *isa && bfp_set_isa(isa) != BFP_OK) {
        raise_status(BFP_ERR_ARG, "BFP_ISA='%s' is not one of generic, avx2, avx512, auto", isa);
        return -1;
    }
    const char *threads = getenv("BFP_THREADS");
    if (threads && *threads) {
        char *end;
        errno = 0;
        long n = strtol(threads, &end, 10);
        if (errno || *end || n < 0 || n > INT_MAX || bfp_set_threads((int)n) != BFP_OK) {
            raise_status(BFP_ERR_ARG,
                         "BFP_THREADS='%s' is not a thread count (an integer >= 0; 0 = automatic)",
                         threads);
            return -1;
        }
    }
    return 0;
}

static PyObject *py_cuda_available(PyObject *self, PyObject *noargs)
{
    return PyBool_FromLong(bfp_cuda_available());
}

static PyObject *py_status_str(PyObject *self, PyObject *arg)
{
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(bfp_status_str((bfp_status)v));
}

static PyMethodDef methods[] = {
    {"formats", py_formats, METH_NOARGS, "formats() -> list of dicts: the format table."},
    {"format_id", py_format_id, METH_O,
     "format_id(name) -> int; case-insensitive; BfpError if unknown."},
    {"plane_sizes", py_plane_sizes, METH_VARARGS,
     "plane_sizes(fmt, rows, cols) -> dict of plane byte sizes."},
    {"options_check", py_options_check, METH_VARARGS,
     "options_check(fmt, opts) -> (status, field, why): bfp_options_check."},
    {"quantize", py_quantize, METH_VARARGS,
     "quantize(fmt, dtype, src, rows, cols, opts, codes, scales, meta, tscale) -> stats"},
    {"dequantize", py_dequantize, METH_VARARGS,
     "dequantize(fmt, codes, scales, meta, tscale, rows, cols, dtype, dst)"},
    {"fake_quant", py_fake_quant, METH_VARARGS,
     "fake_quant(fmt, dtype, src, rows, cols, opts, out_dtype, dst) -> stats"},
    {"validate", py_validate, METH_VARARGS,
     "validate(fmt, codes, scales, meta, tscale, rows, cols) -> (bad_blocks, first_bad)"},
    {"error_stats", py_error_stats, METH_VARARGS,
     "error_stats(x, y, rows, cols, block) -> dict (bfp_error_stats_f32 + bm_share)"},
    {"verify", py_verify, METH_VARARGS,
     "verify(fmt, dtype, src, rows, cols, opts, codes, scales, meta, tscale, "
     "max_mismatches) -> dict (bfp_quantize_ref + bfp_verify)"},
    {"cuda_quantize", py_cuda_quantize, METH_VARARGS, "bfp_cuda_quantize on device pointers."},
    {"cuda_dequantize", py_cuda_dequantize, METH_VARARGS,
     "bfp_cuda_dequantize on device pointers."},
    {"version", py_version, METH_NOARGS, "version() -> libbfp version string."},
    {"isa", py_isa, METH_NOARGS, "isa() -> CPU kernel set in use."},
    {"set_isa", py_set_isa, METH_O, "set_isa(name) -> None: bfp_set_isa."},
    {"set_threads", py_set_threads, METH_O, "set_threads(n) -> None: bfp_set_threads."},
    {"cuda_available", py_cuda_available, METH_NOARGS,
     "cuda_available() -> True if libbfp was built with CUDA and a GPU is usable."},
    {"status_str", py_status_str, METH_O, "status_str(code) -> description."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_core",
    .m_doc = "Low-level bindings of libbfp (use the bfp package, not this module).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    BfpError = PyErr_NewExceptionWithDoc(
        "bfp.BfpError",
        "A libbfp call failed. .status is the bfp_status code, .status_str its "
        "description; a ValueError subclass.",
        PyExc_ValueError, NULL);
    if (!BfpError || PyModule_AddObjectRef(m, "BfpError", BfpError) < 0 ||
        PyModule_AddFunctions(m, bfpmod_io_methods) < 0 ||
        PyModule_AddFunctions(m, bfpmod_matmul_methods) < 0 ||
        PyModule_AddFunctions(m, bfpmod_grouped_methods) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static const struct {
        const char *name;
        int value;
    } ints[] = {
        {"OK", BFP_OK}, {"ERR_ARG", BFP_ERR_ARG}, {"ERR_FORMAT", BFP_ERR_FORMAT},
        {"ERR_SHAPE", BFP_ERR_SHAPE}, {"ERR_UNSUPPORTED", BFP_ERR_UNSUPPORTED},
        {"ERR_NOMEM", BFP_ERR_NOMEM}, {"ERR_IO", BFP_ERR_IO}, {"ERR_DATA", BFP_ERR_DATA},
        {"ERR_DEVICE", BFP_ERR_DEVICE}, {"DTYPE_F32", BFP_DTYPE_F32},
        {"DTYPE_BF16", BFP_DTYPE_BF16}, {"DTYPE_F16", BFP_DTYPE_F16},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (PyModule_AddIntConstant(m, ints[i].name, ints[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    if (apply_environment() < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
