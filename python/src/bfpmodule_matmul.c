/*
 * bfpmodule_matmul.c - the matmul entries of bfp._core (y = x . W^T + bias).
 *
 * matmul_ref, matmul_ref_q: bfp_matmul_ref(_q) on host buffers (the exact
 * oracles the torch ops are tested against). The GPU entries take device pointers as integers
 * and a CUDA stream, as cuda_quantize does: the torch layer (bfp.torch_ops)
 * allocates x, y and the workspace with torch on the current stream; the
 * library never allocates or synchronizes in bfp_cuda_matmul. A weight is
 * uploaded once (bfp_cuda_weight_upload, an offline step) and held in a
 * capsule that frees it.
 */
#include "bfpmodule.h"

#include <stdint.h>
#include <string.h>

#define WEIGHT_CAPSULE "bfp.cuda_weight"

/* A contiguous buffer of at least `need` bytes, or None when `optional`. */
static int get_buf(PyObject *o, Py_buffer *b, size_t need, int writable, int optional,
                   const char *what)
{
    memset(b, 0, sizeof *b);
    if (o == Py_None) {
        if (optional)
            return 0;
        PyErr_Format(PyExc_TypeError, "matmul: %s is required", what);
        return -1;
    }
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0)
        return -1;
    if ((size_t)b->len < need) {
        PyErr_Format(PyExc_ValueError, "matmul: %s has %zd bytes, needs %zu", what, b->len,
                     need);
        PyBuffer_Release(b);
        b->obj = NULL;
        return -1;
    }
    return 0;
}

static void release(Py_buffer *b, int n)
{
    for (int i = 0; i < n; i++)
        if (b[i].obj)
            PyBuffer_Release(&b[i]);
}

/* The four planes of an n x k weight (host buffers; meta, ts may be None). */
static int get_planes(bfp_format fmt, PyObject *const *o, size_t n, size_t k, Py_buffer *b,
                      bfp_const_planes *p)
{
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(fmt, n, k, &sz);
    if (st != BFP_OK) {
        bfpmod_raise(st, "matmul: weight planes");
        return -1;
    }
    if (get_buf(o[0], &b[0], sz.codes, 0, 0, "codes") < 0 ||
        get_buf(o[1], &b[1], sz.scales, 0, 0, "scales") < 0 ||
        get_buf(o[2], &b[2], sz.meta, 0, sz.meta == 0, "meta") < 0 ||
        get_buf(o[3], &b[3], sz.tensor_scale, 0, sz.tensor_scale == 0, "tensor_scale") < 0)
        return -1;
    p->codes = b[0].buf;
    p->scales = b[1].buf;
    p->meta = sz.meta ? b[2].buf : NULL;
    p->tensor_scale = sz.tensor_scale ? b[3].buf : NULL;
    return 0;
}

/* matmul_ref(fmt, codes, scales, meta, ts, n, k, x_bf16, m, bias_bf16, y_f32) */
static PyObject *py_matmul_ref(PyObject *self, PyObject *args)
{
    int fmt;
    PyObject *o[4], *xo, *bo, *yo;
    Py_ssize_t n, k, m;
    if (!PyArg_ParseTuple(args, "iOOOOnnOnOO", &fmt, &o[0], &o[1], &o[2], &o[3], &n, &k,
                          &xo, &m, &bo, &yo))
        return NULL;
    if (n <= 0 || k <= 0 || m <= 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "matmul_ref: n, k and m must be positive");
    Py_buffer b[7] = {{0}};
    bfp_const_planes w;
    if (get_planes((bfp_format)fmt, o, (size_t)n, (size_t)k, b, &w) < 0 ||
        get_buf(xo, &b[4], (size_t)m * (size_t)k * 2, 0, 0, "x") < 0 ||
        get_buf(bo, &b[5], (size_t)n * 2, 0, 1, "bias") < 0 ||
        get_buf(yo, &b[6], (size_t)m * (size_t)n * 4, 1, 0, "y") < 0) {
        release(b, 7);
        return NULL;
    }
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_matmul_ref((bfp_format)fmt, &w, (size_t)n, (size_t)k, b[4].buf, (size_t)m,
                        b[5].obj ? b[5].buf : NULL, b[6].buf);
    Py_END_ALLOW_THREADS
    release(b, 7);
    if (st != BFP_OK)
        return bfpmod_raise(st, "matmul_ref");
    Py_RETURN_NONE;
}

/* matmul_ref_q(w_fmt, codes, scales, meta, ts, n, k, x_fmt, x_codes, x_scales,
 * x_meta, x_ts, m, bias_bf16, y_f32): bfp_matmul_ref_q, x as planes too */
static PyObject *py_matmul_ref_q(PyObject *self, PyObject *args)
{
    int wf, xf;
    PyObject *o[8], *bo, *yo;
    Py_ssize_t n, k, m;
    if (!PyArg_ParseTuple(args, "iOOOOnniOOOOnOO", &wf, &o[0], &o[1], &o[2], &o[3], &n, &k,
                          &xf, &o[4], &o[5], &o[6], &o[7], &m, &bo, &yo))
        return NULL;
    if (n <= 0 || k <= 0 || m <= 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "matmul_ref_q: n, k and m must be positive");
    Py_buffer b[10] = {{0}};
    bfp_const_planes w, x;
    if (get_planes((bfp_format)wf, o, (size_t)n, (size_t)k, b, &w) < 0 ||
        get_planes((bfp_format)xf, o + 4, (size_t)m, (size_t)k, b + 4, &x) < 0 ||
        get_buf(bo, &b[8], (size_t)n * 2, 0, 1, "bias") < 0 ||
        get_buf(yo, &b[9], (size_t)m * (size_t)n * 4, 1, 0, "y") < 0) {
        release(b, 10);
        return NULL;
    }
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_matmul_ref_q((bfp_format)wf, &w, (size_t)n, (size_t)k, (bfp_format)xf, &x,
                          (size_t)m, b[8].obj ? b[8].buf : NULL, b[9].buf);
    Py_END_ALLOW_THREADS
    release(b, 10);
    if (st != BFP_OK)
        return bfpmod_raise(st, "matmul_ref_q");
    Py_RETURN_NONE;
}

static PyObject *py_matmul_format_supported(PyObject *self, PyObject *arg)
{
    long fmt = PyLong_AsLong(arg);
    if (fmt == -1 && PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(bfp_matmul_format_supported((bfp_format)fmt));
}

static void weight_free(PyObject *cap)
{
    bfp_cuda_weight_free(PyCapsule_GetPointer(cap, WEIGHT_CAPSULE));
}

static bfp_cuda_weight *get_weight(PyObject *cap)
{
    return PyCapsule_GetPointer(cap, WEIGHT_CAPSULE); /* NULL + TypeError if not one */
}

/* cuda_weight_upload(fmt, codes, scales, meta, ts, n, k) -> capsule (host planes) */
static PyObject *py_cuda_weight_upload(PyObject *self, PyObject *args)
{
    int fmt;
    PyObject *o[4];
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "iOOOOnn", &fmt, &o[0], &o[1], &o[2], &o[3], &n, &k))
        return NULL;
    if (n <= 0 || k <= 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_weight_upload: n and k must be positive");
    Py_buffer b[4] = {{0}};
    bfp_const_planes w;
    if (get_planes((bfp_format)fmt, o, (size_t)n, (size_t)k, b, &w) < 0) {
        release(b, 4);
        return NULL;
    }
    bfp_cuda_weight *dw = NULL;
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_weight_upload((bfp_format)fmt, &w, (size_t)n, (size_t)k, &dw);
    Py_END_ALLOW_THREADS
    release(b, 4);
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_weight_upload");
    PyObject *cap = PyCapsule_New(dw, WEIGHT_CAPSULE, weight_free);
    if (!cap)
        bfp_cuda_weight_free(dw);
    return cap;
}

/* cuda_weight_packed_size(fmt, n, k) -> bytes */
static PyObject *py_cuda_weight_packed_size(PyObject *self, PyObject *args)
{
    int fmt;
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "inn", &fmt, &n, &k))
        return NULL;
    if (n <= 0 || k <= 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_weight_packed_size: n and k must be positive");
    size_t bytes = 0;
    bfp_status st = bfp_cuda_weight_packed_size((bfp_format)fmt, (size_t)n, (size_t)k, &bytes);
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_weight_packed_size");
    return PyLong_FromSize_t(bytes);
}

/* cuda_weight_pack_host(fmt, codes, scales, meta, ts, n, k, out): the packed
 * image into the writable host buffer out */
static PyObject *py_cuda_weight_pack_host(PyObject *self, PyObject *args)
{
    int fmt;
    PyObject *o[4], *out;
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "iOOOOnnO", &fmt, &o[0], &o[1], &o[2], &o[3], &n, &k, &out))
        return NULL;
    if (n <= 0 || k <= 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_weight_pack_host: n and k must be positive");
    size_t bytes = 0;
    bfp_status st = bfp_cuda_weight_packed_size((bfp_format)fmt, (size_t)n, (size_t)k, &bytes);
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_weight_pack_host");
    Py_buffer b[5] = {{0}};
    bfp_const_planes w;
    if (get_planes((bfp_format)fmt, o, (size_t)n, (size_t)k, b, &w) < 0 ||
        get_buf(out, &b[4], bytes, 1, 0, "out") < 0) {
        release(b, 5);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_weight_pack_host((bfp_format)fmt, &w, (size_t)n, (size_t)k, b[4].buf,
                                   (size_t)b[4].len);
    Py_END_ALLOW_THREADS
    release(b, 5);
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_weight_pack_host");
    Py_RETURN_NONE;
}

/* cuda_weight_unpack_host(fmt, n, k, image, out_f32) */
static PyObject *py_cuda_weight_unpack_host(PyObject *self, PyObject *args)
{
    int fmt;
    PyObject *img, *out;
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "innOO", &fmt, &n, &k, &img, &out))
        return NULL;
    if (n <= 0 || k <= 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_weight_unpack_host: n and k must be positive");
    Py_buffer b[2] = {{0}};
    if (get_buf(img, &b[0], 0, 0, 0, "image") < 0 ||
        get_buf(out, &b[1], (size_t)n * (size_t)k * 4, 1, 0, "out") < 0) {
        release(b, 2);
        return NULL;
    }
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_weight_unpack_host((bfp_format)fmt, (size_t)n, (size_t)k, b[0].buf,
                                     (size_t)b[0].len, b[1].buf);
    Py_END_ALLOW_THREADS
    release(b, 2);
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_weight_unpack_host: not this format's packed weight");
    Py_RETURN_NONE;
}

/* cuda_weight_view(fmt, n, k, buf_ptr, bytes) -> capsule (the view only) */
static PyObject *py_cuda_weight_view(PyObject *self, PyObject *args)
{
    int fmt;
    Py_ssize_t n, k, bytes;
    unsigned long long ptr;
    if (!PyArg_ParseTuple(args, "innKn", &fmt, &n, &k, &ptr, &bytes))
        return NULL;
    if (n <= 0 || k <= 0 || bytes < 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_weight_view: n and k must be positive");
    bfp_cuda_weight *dw = NULL;
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_weight_view((bfp_format)fmt, (size_t)n, (size_t)k,
                              (const void *)(uintptr_t)ptr, (size_t)bytes, &dw);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_weight_view: not this format's packed weight, or no GPU");
    PyObject *cap = PyCapsule_New(dw, WEIGHT_CAPSULE, weight_free);
    if (!cap)
        bfp_cuda_weight_free(dw);
    return cap;
}

/* cuda_weight_unpack(weight, dtype, out_ptr, stream) */
static PyObject *py_cuda_weight_unpack(PyObject *self, PyObject *args)
{
    PyObject *cap;
    int dtype;
    unsigned long long out, stream;
    if (!PyArg_ParseTuple(args, "OiKK", &cap, &dtype, &out, &stream))
        return NULL;
    bfp_cuda_weight *w = get_weight(cap);
    if (!w)
        return NULL;
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_weight_unpack(w, (bfp_dtype)dtype, (void *)(uintptr_t)out,
                                (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_weight_unpack");
    Py_RETURN_NONE;
}

/* cuda_matmul_workspace_size_max(weight) -> bytes */
static PyObject *py_cuda_matmul_workspace_size_max(PyObject *self, PyObject *cap)
{
    bfp_cuda_weight *w = get_weight(cap);
    if (!w)
        return NULL;
    return PyLong_FromSize_t(bfp_cuda_matmul_workspace_size_max(w));
}

/* The tuning the torch ops pass: the defaults, or gemv_pdl (0 / 1) */
static int pdl_tuning(int gemv_pdl, bfp_matmul_tuning *t)
{
    if (gemv_pdl != 0 && gemv_pdl != 1) { /* the only field set: no other check applies */
        bfpmod_raise(BFP_ERR_ARG, "cuda_matmul: gemv_pdl must be 0 or 1");
        return -1;
    }
    const bfp_matmul_tuning zero = {0};
    *t = zero;
    t->gemv_pdl = gemv_pdl;
    return 0;
}

/* cuda_matmul_workspace_size(weight, m, path, gemv_pdl=0) -> bytes */
static PyObject *py_cuda_matmul_workspace_size(PyObject *self, PyObject *args)
{
    PyObject *cap;
    Py_ssize_t m;
    int path, gemv_pdl = 0;
    bfp_matmul_tuning t;
    if (!PyArg_ParseTuple(args, "Oni|i", &cap, &m, &path, &gemv_pdl) ||
        pdl_tuning(gemv_pdl, &t) < 0)
        return NULL;
    bfp_cuda_weight *w = get_weight(cap);
    if (!w)
        return NULL;
    return PyLong_FromSize_t(bfp_cuda_matmul_workspace_size_ex(w, (size_t)m,
                                                               (bfp_matmul_path)path, &t));
}

/* cuda_matmul(weight, x_ptr, m, bias_ptr, y_ptr, ws_ptr, ws_bytes, path, stream,
 *             gemv_pdl=0) */
static PyObject *py_cuda_matmul(PyObject *self, PyObject *args)
{
    PyObject *cap;
    unsigned long long x, bias, y, ws, stream;
    Py_ssize_t m, ws_bytes;
    int path, gemv_pdl = 0;
    bfp_matmul_tuning t;
    if (!PyArg_ParseTuple(args, "OKnKKKniK|i", &cap, &x, &m, &bias, &y, &ws, &ws_bytes, &path,
                          &stream, &gemv_pdl) ||
        pdl_tuning(gemv_pdl, &t) < 0)
        return NULL;
    bfp_cuda_weight *w = get_weight(cap);
    if (!w)
        return NULL;
    if (m <= 0 || ws_bytes < 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_matmul: m must be positive, ws_bytes >= 0");
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_matmul_ex(w, (const void *)(uintptr_t)x, (size_t)m,
                            (const void *)(uintptr_t)bias, (void *)(uintptr_t)y,
                            (void *)(uintptr_t)ws, (size_t)ws_bytes, (bfp_matmul_path)path, &t,
                            (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_matmul");
    Py_RETURN_NONE;
}

/* W as device planes (bfp_cuda_planar_weight) from integers */
static bfp_cuda_planar_weight planar_weight(int fmt, Py_ssize_t n, Py_ssize_t k,
                                            unsigned long long codes, unsigned long long scales,
                                            unsigned long long meta, double ts)
{
    bfp_cuda_planar_weight w = {(bfp_format)fmt,
                                (size_t)n,
                                (size_t)k,
                                (const void *)(uintptr_t)codes,
                                (const void *)(uintptr_t)scales,
                                (const void *)(uintptr_t)meta,
                                (float)ts};
    return w;
}

/* cuda_matmul_xq_supported(w_fmt, x_fmt) -> bool (pure computation) */
static PyObject *py_cuda_matmul_xq_supported(PyObject *self, PyObject *args)
{
    int wf, xf;
    if (!PyArg_ParseTuple(args, "ii", &wf, &xf))
        return NULL;
    return PyBool_FromLong(bfp_cuda_matmul_xq_supported((bfp_format)wf, (bfp_format)xf));
}

/* cuda_matmul_xq_workspace_size(w_fmt, n, k, codes, scales, meta, w_ts, x_fmt, m) */
static PyObject *py_cuda_matmul_xq_workspace_size(PyObject *self, PyObject *args)
{
    int wf, xf;
    Py_ssize_t n, k, m;
    unsigned long long c, s, mt;
    double ts;
    if (!PyArg_ParseTuple(args, "innKKKdin", &wf, &n, &k, &c, &s, &mt, &ts, &xf, &m))
        return NULL;
    if (n <= 0 || k <= 0 || m <= 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_matmul_xq_workspace_size: n, k, m positive");
    bfp_cuda_planar_weight w = planar_weight(wf, n, k, c, s, mt, ts);
    return PyLong_FromSize_t(bfp_cuda_matmul_xq_workspace_size(&w, (bfp_format)xf, (size_t)m,
                                                               NULL));
}

/* cuda_matmul_xq(w_fmt, n, k, codes, scales, meta, w_ts, x_fmt, x_ptr, m, bias_ptr,
 * y_ptr, ws_ptr, ws_bytes, stream): x bf16 quantized on the fly */
static PyObject *py_cuda_matmul_xq(PyObject *self, PyObject *args)
{
    int wf, xf;
    Py_ssize_t n, k, m, ws_bytes;
    unsigned long long c, s, mt, x, bias, y, ws, stream;
    double ts;
    if (!PyArg_ParseTuple(args, "innKKKdiKnKKKnK", &wf, &n, &k, &c, &s, &mt, &ts, &xf, &x,
                          &m, &bias, &y, &ws, &ws_bytes, &stream))
        return NULL;
    if (n <= 0 || k <= 0 || m <= 0 || ws_bytes < 0)
        return bfpmod_raise(BFP_ERR_SHAPE, "cuda_matmul_xq: n, k, m positive, ws_bytes >= 0");
    bfp_cuda_planar_weight w = planar_weight(wf, n, k, c, s, mt, ts);
    bfp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bfp_cuda_matmul_xq(&w, (bfp_format)xf, (const void *)(uintptr_t)x, (size_t)m,
                            (const void *)(uintptr_t)bias, (void *)(uintptr_t)y,
                            (void *)(uintptr_t)ws, (size_t)ws_bytes, NULL,
                            (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    if (st != BFP_OK)
        return bfpmod_raise(st, "cuda_matmul_xq");
    Py_RETURN_NONE;
}

PyMethodDef bfpmod_matmul_methods[] = {
    {"matmul_ref", py_matmul_ref, METH_VARARGS,
     "matmul_ref(fmt, codes, scales, meta, ts, n, k, x_bf16, m, bias_bf16, y_f32): "
     "bfp_matmul_ref."},
    {"matmul_ref_q", py_matmul_ref_q, METH_VARARGS,
     "matmul_ref_q(w_fmt, codes, scales, meta, ts, n, k, x_fmt, x_codes, x_scales, x_meta, "
     "x_ts, m, bias_bf16, y_f32): bfp_matmul_ref_q."},
    {"matmul_format_supported", py_matmul_format_supported, METH_O,
     "matmul_format_supported(fmt) -> bool: bfp_matmul_format_supported."},
    {"cuda_weight_upload", py_cuda_weight_upload, METH_VARARGS,
     "cuda_weight_upload(fmt, codes, scales, meta, ts, n, k) -> weight capsule."},
    {"cuda_weight_packed_size", py_cuda_weight_packed_size, METH_VARARGS,
     "cuda_weight_packed_size(fmt, n, k) -> bytes of the packed weight."},
    {"cuda_weight_pack_host", py_cuda_weight_pack_host, METH_VARARGS,
     "cuda_weight_pack_host(fmt, codes, scales, meta, ts, n, k, out): the packed image."},
    {"cuda_weight_unpack_host", py_cuda_weight_unpack_host, METH_VARARGS,
     "cuda_weight_unpack_host(fmt, n, k, image, out_f32): decode a host image."},
    {"cuda_weight_view", py_cuda_weight_view, METH_VARARGS,
     "cuda_weight_view(fmt, n, k, buf_ptr, bytes) -> view capsule of a device buffer."},
    {"cuda_weight_unpack", py_cuda_weight_unpack, METH_VARARGS,
     "cuda_weight_unpack(weight, dtype, out_ptr, stream): decode on the GPU."},
    {"cuda_matmul_workspace_size_max", py_cuda_matmul_workspace_size_max, METH_O,
     "cuda_matmul_workspace_size_max(weight) -> bytes serving AUTO at every m."},
    {"cuda_matmul_workspace_size", py_cuda_matmul_workspace_size, METH_VARARGS,
     "cuda_matmul_workspace_size(weight, m, path, gemv_pdl=0) -> bytes."},
    {"cuda_matmul", py_cuda_matmul, METH_VARARGS,
     "cuda_matmul(weight, x_ptr, m, bias_ptr, y_ptr, ws_ptr, ws_bytes, path, stream, "
     "gemv_pdl=0)."},
    {"cuda_matmul_xq_supported", py_cuda_matmul_xq_supported, METH_VARARGS,
     "cuda_matmul_xq_supported(w_fmt, x_fmt) -> bool: a GPU kernel for this pair."},
    {"cuda_matmul_xq_workspace_size", py_cuda_matmul_xq_workspace_size, METH_VARARGS,
     "cuda_matmul_xq_workspace_size(w_fmt, n, k, codes, scales, meta, w_ts, x_fmt, m)."},
    {"cuda_matmul_xq", py_cuda_matmul_xq, METH_VARARGS,
     "cuda_matmul_xq(w_fmt, n, k, codes, scales, meta, w_ts, x_fmt, x_ptr, m, bias_ptr, "
     "y_ptr, ws_ptr, ws_bytes, stream): bfp_cuda_matmul_xq."},
    {NULL, NULL, 0, NULL},
};
