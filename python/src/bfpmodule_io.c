/*
 * bfpmodule_io.c - the file functions of bfp._core: bfp.save / bfp.load go
 * through libbfp's io layer (src/io, bfp_io.h), the same reader and writer
 * the CLI uses and the fuzzers test. Python keeps only the state-dict
 * directory and its JSON index.
 *
 * A failure raises bfp._core.BfpError with the io layer's one-line message
 * followed by the status string (MemoryError for BFP_ERR_NOMEM).
 */
#include "bfpmodule.h"

#include "bfp_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERRLEN 512

static PyObject *io_fail(bfp_status st, const char *err)
{
    return bfpmod_raise(st, err[0] ? err : "bfp io");
}

/* A shape from a sequence of non-negative ints; -1 with an error set. */
static int get_shape(PyObject *o, size_t *shape, size_t *ndim)
{
    PyObject *seq = PySequence_Fast(o, "shape must be a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > BFP_IO_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "shape has %zd dimensions (max %d)", n,
                     BFP_IO_MAX_DIMS);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t v = PyLong_AsSize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (v == (size_t)-1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        shape[i] = v;
    }
    *ndim = (size_t)n;
    Py_DECREF(seq);
    return 0;
}

static PyObject *shape_tuple(const size_t *shape, size_t ndim)
{
    PyObject *t = PyTuple_New((Py_ssize_t)ndim);
    for (size_t i = 0; t && i < ndim; i++) {
        PyObject *v = PyLong_FromSize_t(shape[i]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, v);
    }
    return t;
}

/* A read-only C-contiguous buffer of exactly need bytes (SIZE_MAX: any). */
static int read_buf(PyObject *o, Py_buffer *b, size_t need, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: need a C-contiguous buffer, got %.100s",
                     what, Py_TYPE(o)->tp_name);
        return -1;
    }
    if (need != SIZE_MAX && (size_t)b->len != need) {
        PyErr_Format(PyExc_ValueError, "%s plane has %zd bytes, the shape needs %zu",
                     what, b->len, need);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* stats: a dict with the bfp_stats_fields() names (missing ones 0). */
static int get_stats(PyObject *d, bfp_stats *s)
{
    size_t n;
    const bfp_stats_field *fl = bfp_stats_fields(&n);
    memset(s, 0, sizeof *s);
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "stats must be a dict");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *v = PyDict_GetItemString(d, fl[i].name); /* borrowed */
        if (!v)
            continue;
        size_t x = PyLong_AsSize_t(v);
        if (x == (size_t)-1 && PyErr_Occurred())
            return -1;
        memcpy((char *)s + fl[i].offset, &x, sizeof x);
    }
    return 0;
}

static PyObject *stats_dict(const bfp_stats *s)
{
    size_t n;
    const bfp_stats_field *fl = bfp_stats_fields(&n);
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < n; i++) {
        size_t x;
        memcpy(&x, (const char *)s + fl[i].offset, sizeof x);
        PyObject *v = PyLong_FromSize_t(x);
        if (!v || PyDict_SetItemString(d, fl[i].name, v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

/* qtensor_save(path, name, fmt, shape, opts, codes, scales, meta, tscale,
 * axis, stats, source_dtype, force): bfp_qtensor_save(). shape is the
 * blocked shape (blocks along its last axis); meta / tscale (a float) None
 * when the format has none; axis -1, stats None, source_dtype -1: not
 * recorded. */
static PyObject *py_qtensor_save(PyObject *self, PyObject *args)
{
    PyObject *path_b = NULL, *shape_o, *opts_o, *codes_o, *scales_o, *meta_o, *ts_o,
             *stats_o;
    const char *name;
    int fmt, source_dtype, force;
    Py_ssize_t axis;
    bfp_qtensor q;
    char err[ERRLEN] = "";
    Py_buffer b[3];
    int nb = 0;
    PyObject *ret = NULL;

    memset(&q, 0, sizeof q);
    if (!PyArg_ParseTuple(args, "O&siOOOOOOnOip", PyUnicode_FSConverter, &path_b, &name,
                          &fmt, &shape_o, &opts_o, &codes_o, &scales_o, &meta_o, &ts_o,
                          &axis, &stats_o, &source_dtype, &force))
        return NULL;
    const bfp_format_info *f = bfp_format_get((bfp_format)fmt);
    if (!f) {
        snprintf(err, sizeof err, "format id %d", fmt);
        bfpmod_raise(BFP_ERR_FORMAT, err);
        goto out;
    }
    if (get_shape(shape_o, q.shape, &q.ndim) < 0 || bfpmod_parse_opts(opts_o, &q.options) < 0)
        goto out;
    q.format = f->id;
    bfp_tensor t;
    memset(&t, 0, sizeof t);
    t.ndim = q.ndim;
    memcpy(t.shape, q.shape, sizeof t.shape);
    bfp_tensor_rows_cols(&t, &q.rows, &q.cols);
    bfp_status st = bfp_plane_sizes_for(f->id, q.rows, q.cols, &q.sizes);
    if (st != BFP_OK) {
        snprintf(err, sizeof err, "%s: %s of %zu x %zu", PyBytes_AS_STRING(path_b), f->name,
                 q.rows, q.cols);
        bfpmod_raise(st, err);
        goto out;
    }
    if (read_buf(codes_o, &b[nb], q.sizes.codes, "codes") < 0)
        goto out;
    q.codes = b[nb++].buf;
    if (read_buf(scales_o, &b[nb], q.sizes.scales, "scales") < 0)
        goto out;
    q.scales = b[nb++].buf;
    if (q.sizes.meta > 0) {
        if (meta_o == Py_None) {
            PyErr_Format(PyExc_ValueError, "%s needs a meta plane", f->name);
            goto out;
        }
        if (read_buf(meta_o, &b[nb], q.sizes.meta, "meta") < 0)
            goto out;
        q.meta = b[nb++].buf;
    }
    q.tensor_scale = 1.0f;
    if (f->has_tensor_scale) {
        double v = ts_o == Py_None ? -1.0 : PyFloat_AsDouble(ts_o);
        if (v == -1.0 && PyErr_Occurred())
            goto out;
        if (ts_o == Py_None) {
            PyErr_Format(PyExc_ValueError, "%s needs a tensor_scale", f->name);
            goto out;
        }
        q.tensor_scale = (float)v;
    }
    if (axis >= 0) {
        q.has_axis = 1;
        q.axis = (size_t)axis;
    }
    if (stats_o != Py_None) {
        if (get_stats(stats_o, &q.stats) < 0)
            goto out;
        q.has_stats = 1;
    }
    if (source_dtype >= 0) {
        q.has_source_dtype = 1;
        q.source_dtype = (bfp_dtype)source_dtype;
    }
    const char *path = PyBytes_AS_STRING(path_b);
    Py_BEGIN_ALLOW_THREADS
    st = bfp_qtensor_save(path, name, &q, force, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        io_fail(st, err);
    else
        ret = Py_NewRef(Py_None);
out:
    while (nb > 0)
        PyBuffer_Release(&b[--nb]);
    Py_XDECREF(path_b);
    return ret;
}

static PyObject *bytes_of(const void *p, size_t n)
{
    return PyByteArray_FromStringAndSize((const char *)p, (Py_ssize_t)n);
}

/* qtensor_load(path, name|None) -> dict: format (id), shape (blocked),
 * options (rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d),
 * codes, scales, meta (bytearrays; meta None if the format has none),
 * tensor_scale (float or None), axis, stats, source_dtype (None when the
 * file does not record them). */
static PyObject *py_qtensor_load(PyObject *self, PyObject *args)
{
    PyObject *path_b = NULL, *out = NULL;
    const char *name;
    bfp_qtensor q;
    char err[ERRLEN] = "";
    bfp_status st;

    if (!PyArg_ParseTuple(args, "O&z", PyUnicode_FSConverter, &path_b, &name))
        return NULL;
    const char *path = PyBytes_AS_STRING(path_b);
    Py_BEGIN_ALLOW_THREADS
    st = bfp_qtensor_load(path, name, &q, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_b);
    if (st != BFP_OK)
        return io_fail(st, err);
    const bfp_format_info *f = bfp_format_get(q.format);
    PyObject *shape = shape_tuple(q.shape, q.ndim);
    PyObject *codes = bytes_of(q.codes, q.sizes.codes);
    PyObject *scales = bytes_of(q.scales, q.sizes.scales);
    PyObject *meta = q.meta ? bytes_of(q.meta, q.sizes.meta) : Py_NewRef(Py_None);
    PyObject *ts = f && f->has_tensor_scale ? PyFloat_FromDouble((double)q.tensor_scale)
                                            : Py_NewRef(Py_None);
    PyObject *axis = q.has_axis ? PyLong_FromSize_t(q.axis) : Py_NewRef(Py_None);
    PyObject *stats = q.has_stats ? stats_dict(&q.stats) : Py_NewRef(Py_None);
    PyObject *sdt = q.has_source_dtype ? PyLong_FromLong((long)q.source_dtype)
                                       : Py_NewRef(Py_None);
    if (shape && codes && scales && meta && ts && axis && stats && sdt)
        out = Py_BuildValue("{s:i,s:O,s:(iKiii),s:O,s:O,s:O,s:O,s:O,s:O,s:O}", "format",
                            (int)q.format, "shape", shape, "options", (int)q.options.rounding,
                            (unsigned long long)q.options.seed, (int)q.options.scale_mode,
                            q.options.nvfp4_no_tensor_scale, q.options.nvfp4_2d, "codes",
                            codes, "scales", scales, "meta", meta, "tensor_scale", ts, "axis",
                            axis, "stats", stats, "source_dtype", sdt);
    Py_XDECREF(shape);
    Py_XDECREF(codes);
    Py_XDECREF(scales);
    Py_XDECREF(meta);
    Py_XDECREF(ts);
    Py_XDECREF(axis);
    Py_XDECREF(stats);
    Py_XDECREF(sdt);
    bfp_qtensor_free(&q);
    return out;
}

/* safetensors_save_set(path, [(name, dtype, shape, buffer), ...], force):
 * float tensors (F32 / F16 / BF16 codes; bf16 as raw uint16) in one file. */
static PyObject *py_safetensors_save_set(PyObject *self, PyObject *args)
{
    PyObject *path_b = NULL, *list_o, *seq = NULL, *ret = NULL;
    int force;
    char err[ERRLEN] = "";
    const char **names = NULL;
    bfp_tensor *ts = NULL;
    Py_buffer *bufs = NULL;
    Py_ssize_t n = 0, held = 0;

    if (!PyArg_ParseTuple(args, "O&Op", PyUnicode_FSConverter, &path_b, &list_o, &force))
        return NULL;
    if (!(seq = PySequence_Fast(list_o, "tensors must be a list")))
        goto out;
    n = PySequence_Fast_GET_SIZE(seq);
    names = calloc((size_t)(n ? n : 1), sizeof *names);
    ts = calloc((size_t)(n ? n : 1), sizeof *ts);
    bufs = calloc((size_t)(n ? n : 1), sizeof *bufs);
    if (!names || !ts || !bufs) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *shape_o, *buf_o;
        int dtype;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "siOO;(name, dtype, shape, "
                              "buffer)", &names[i], &dtype, &shape_o, &buf_o) ||
            get_shape(shape_o, ts[i].shape, &ts[i].ndim) < 0 ||
            read_buf(buf_o, &bufs[i], SIZE_MAX, names[i]) < 0)
            goto out;
        held = i + 1;
        ts[i].dtype = (bfp_dtype)dtype;
        ts[i].data = bufs[i].buf;
        ts[i].nbytes = (size_t)bufs[i].len;
    }
    const char *path = PyBytes_AS_STRING(path_b);
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_safetensors_save_set(path, names, ts, (size_t)n, force, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        io_fail(st, err);
    else
        ret = Py_NewRef(Py_None);
out:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&bufs[i]);
    free(bufs);
    free(ts);
    free(names);
    Py_XDECREF(seq);
    Py_XDECREF(path_b);
    return ret;
}

/* safetensors_load_set(path) -> [(name, dtype, shape, bytearray), ...] in
 * header order. */
static PyObject *py_safetensors_load_set(PyObject *self, PyObject *args)
{
    PyObject *path_b = NULL, *list;
    bfp_tensor_set s;
    char err[ERRLEN] = "";
    bfp_status st;

    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path_b))
        return NULL;
    const char *path = PyBytes_AS_STRING(path_b);
    Py_BEGIN_ALLOW_THREADS
    st = bfp_safetensors_load_set(path, &s, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_b);
    if (st != BFP_OK)
        return io_fail(st, err);
    list = PyList_New((Py_ssize_t)s.count);
    for (size_t i = 0; list && i < s.count; i++) {
        const bfp_tensor *t = &s.tensors[i];
        PyObject *shape = shape_tuple(t->shape, t->ndim);
        PyObject *data = bytes_of(t->data, t->nbytes);
        PyObject *item = shape && data ? Py_BuildValue("(siOO)", s.names[i], (int)t->dtype,
                                                       shape, data)
                                       : NULL;
        Py_XDECREF(shape);
        Py_XDECREF(data);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    bfp_tensor_set_free(&s);
    return list;
}

PyMethodDef bfpmod_io_methods[] = {
    {"qtensor_save", py_qtensor_save, METH_VARARGS,
     "qtensor_save(path, name, fmt, shape, opts, codes, scales, meta, tscale, axis, "
     "stats, source_dtype, force): bfp_qtensor_save()."},
    {"qtensor_load", py_qtensor_load, METH_VARARGS,
     "qtensor_load(path, name) -> dict: bfp_qtensor_load()."},
    {"safetensors_save_set", py_safetensors_save_set, METH_VARARGS,
     "safetensors_save_set(path, [(name, dtype, shape, buffer)], force)."},
    {"safetensors_load_set", py_safetensors_load_set, METH_VARARGS,
     "safetensors_load_set(path) -> [(name, dtype, shape, bytearray)]."},
    {NULL, NULL, 0, NULL},
};
