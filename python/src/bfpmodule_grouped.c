/*
 * bfpmodule_grouped.c - the grouped (MoE) matmul entries of bfp._core
 * (bfp_grouped.h). The torch layer (bfp.torch_moe) owns every device buffer:
 * it packs the grouped image on the host (grouped_weight_pack_host), copies
 * it into a torch uint8 tensor, and views it (cuda_grouped_weight_view, a
 * capsule that frees only the view). Device pointers travel as integers.
 */
#include "bfpmodule.h"

#include "bfp_grouped.h"

#include <stdint.h>
#include <string.h>

#define GWEIGHT_CAPSULE "bfp.cuda_grouped_weight"

static int buf_of(PyObject *o, Py_buffer *b, size_t need, int writable, int optional,
                  const char *what)
{
    memset(b, 0, sizeof *b);
    if (o == Py_None) {
        if (optional)
            return 0;
        PyErr_Format(PyExc_TypeError, "grouped: %s is required", what);
        return -1;
    }
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if ((size_t)b->len < need) {
        PyErr_Format(PyExc_ValueError, "grouped: %s has %zd bytes, needs %zu", what, b->len,
                     need);
        PyBuffer_Release(b);
        b->obj = NULL;
        return -1;
    }
    return 0;
}

/* grouped_weight_packed_size(fmt, e_count, n, k) -> bytes */
static PyObject *py_packed_size(PyObject *self, PyObject *args)
{
    int fmt;
    Py_ssize_t e, n, k;
    if (!PyArg_ParseTuple(args, "innn", &fmt, &e, &n, &k))
        return NULL;
    if (e <= 0 || n <= 0 || k <= 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "grouped_weight_packed_size");
    size_t bytes = 0;
    bfp_status st = bfp_cuda_grouped_weight_packed_size((bfp_format)fmt, (size_t)e, (size_t)n,
                                                        (size_t)k, &bytes);
    if (st != BFP_OK)
        return bfpmod_raise(st, "grouped_weight_packed_size");
    return PyLong_FromSize_t(bytes);
}

/* grouped_weight_pack_host(fmt, codes, scales, meta, ts, e_count, n, k, out):
 * the planes of e_count experts back to back (ts: e_count float32) */
static PyObject *py_pack_host(PyObject *self, PyObject *args)
{
    int fmt;
    PyObject *o[5];
    Py_ssize_t e, n, k;
    if (!PyArg_ParseTuple(args, "iOOOOnnnO", &fmt, &o[0], &o[1], &o[2], &o[3], &e, &n, &k,
                          &o[4]))
        return NULL;
    bfp_plane_sizes sz;
    size_t total;
    bfp_status st = e > 0 && n > 0 && k > 0
                        ? bfp_cuda_grouped_weight_packed_size((bfp_format)fmt, (size_t)e,
                                                              (size_t)n, (size_t)k, &total)
                        : BFP_ERR_SHAPE;
    if (st == BFP_OK)
        st = bfp_plane_sizes_for((bfp_format)fmt, (size_t)n, (size_t)k, &sz);
    if (st != BFP_OK)
        return bfpmod_raise(st, "grouped_weight_pack_host");
    const size_t E = (size_t)e;
    Py_buffer b[5];
    memset(b, 0, sizeof b);
    if (buf_of(o[0], &b[0], E * sz.codes, 0, 0, "codes") < 0 ||
        buf_of(o[1], &b[1], E * sz.scales, 0, 0, "scales") < 0 ||
        buf_of(o[2], &b[2], E * sz.meta, 0, sz.meta == 0, "meta") < 0 ||
        buf_of(o[3], &b[3], E * sz.tensor_scale, 0, sz.tensor_scale == 0, "tensor_scale") < 0 ||
        buf_of(o[4], &b[4], total, 1, 0, "out") < 0) {
        for (int i = 0; i < 5; i++)
            if (b[i].obj)
                PyBuffer_Release(&b[i]);
        return NULL;
    }
    bfp_const_planes *w = PyMem_Calloc(E, sizeof *w);
    if (!w)
        st = BFP_ERR_NOMEM;
    for (size_t i = 0; w && i < E; i++) {
        w[i].codes = (const uint8_t *)b[0].buf + i * sz.codes;
        w[i].scales = (const uint8_t *)b[1].buf + i * sz.scales;
        w[i].meta = sz.meta ? (const uint8_t *)b[2].buf + i * sz.meta : NULL;
        w[i].tensor_scale = sz.tensor_scale ? (const float *)b[3].buf + i : NULL;
    }
    if (w) {
        Py_BEGIN_ALLOW_THREADS
        st = bfp_cuda_grouped_weight_pack_host((bfp_format)fmt, w, E, (size_t)n, (size_t)k,
                                               b[4].buf, total);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(w);
    for (int i = 0; i < 5; i++)
        if (b[i].obj)
            PyBuffer_Release(&b[i]);
    if (st != BFP_OK)
        return bfpmod_raise(st, "grouped_weight_pack_host");
    Py_RETURN_NONE;
}

static void gweight_free(PyObject *cap)
{
    bfp_cuda_grouped_weight_free(PyCapsule_GetPointer(cap, GWEIGHT_CAPSULE));
}

/* cuda_grouped_weight_view(fmt, e_count, n, k, ptr, bytes) -> capsule */
static PyObject *py_view(PyObject *self, PyObject *args)
{
    int fmt;
    Py_ssize_t e, n, k, bytes;
    unsigned long long ptr;
    if (!PyArg_ParseTuple(args, "innnKn", &fmt, &e, &n, &k, &ptr, &bytes))
        return NULL;
    if (e <= 0 || n <= 0 || k <= 0 || bytes < 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_grouped_weight_view");
    bfp_cuda_grouped_weight *w = NULL;
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_grouped_weight_view((bfp_format)fmt, (size_t)e, (size_t)n, (size_t)k,
                                      (const void *)(uintptr_t)ptr, (size_t)bytes, &w);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_grouped_weight_view");
    PyObject *cap = PyCapsule_New(w, GWEIGHT_CAPSULE, gweight_free);
    if (!cap)
        bfp_cuda_grouped_weight_free(w);
    return cap;
}

/* cuda_grouped_matmul_workspace_size(weight, t_rows) -> bytes */
static PyObject *py_ws_size(PyObject *self, PyObject *args)
{
    PyObject *cap;
    Py_ssize_t t;
    if (!PyArg_ParseTuple(args, "On", &cap, &t))
        return NULL;
    bfp_cuda_grouped_weight *w = PyCapsule_GetPointer(cap, GWEIGHT_CAPSULE);
    if (!w)
        return NULL;
    return PyLong_FromSize_t(bfp_cuda_grouped_matmul_workspace_size(w, (size_t)t, NULL));
}

/* cuda_grouped_matmul(weight, x, t_rows, offsets, bias, y, ws, ws_bytes, stream) */
static PyObject *py_matmul(PyObject *self, PyObject *args)
{
    PyObject *cap;
    unsigned long long x, off, bias, y, ws, stream;
    Py_ssize_t t, ws_bytes;
    if (!PyArg_ParseTuple(args, "OKnKKKKnK", &cap, &x, &t, &off, &bias, &y, &ws, &ws_bytes,
                          &stream))
        return NULL;
    bfp_cuda_grouped_weight *w = PyCapsule_GetPointer(cap, GWEIGHT_CAPSULE);
    if (!w)
        return NULL;
    if (t < 0 || ws_bytes < 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_grouped_matmul: t_rows, ws_bytes >= 0");
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_grouped_matmul(w, (const void *)(uintptr_t)x, (size_t)t,
                                 (const int32_t *)(uintptr_t)off, (const void *)(uintptr_t)bias,
                                 (void *)(uintptr_t)y, (void *)(uintptr_t)ws, (size_t)ws_bytes,
                                 NULL, (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_grouped_matmul");
    Py_RETURN_NONE;
}

PyMethodDef bfpmod_grouped_methods[] = {
    {"grouped_weight_packed_size", py_packed_size, METH_VARARGS,
     "grouped_weight_packed_size(fmt, e_count, n, k) -> bytes."},
    {"grouped_weight_pack_host", py_pack_host, METH_VARARGS,
     "grouped_weight_pack_host(fmt, codes, scales, meta, ts, e_count, n, k, out)."},
    {"cuda_grouped_weight_view", py_view, METH_VARARGS,
     "cuda_grouped_weight_view(fmt, e_count, n, k, ptr, bytes) -> capsule."},
    {"cuda_grouped_matmul_workspace_size", py_ws_size, METH_VARARGS,
     "cuda_grouped_matmul_workspace_size(weight, t_rows) -> bytes."},
    {"cuda_grouped_matmul", py_matmul, METH_VARARGS,
     "cuda_grouped_matmul(weight, x, t_rows, offsets, bias, y, ws, ws_bytes, stream)."},
    {NULL, NULL, 0, NULL},
};
