/* test_io_fixtures.c - files written by numpy, ml_dtypes and the safetensors
 * package (tests/io_data/make_fixtures.py) load with the right values. Run
 * from the repository root. */
#include "test_io_util.h"

#define D "tests/io_data/"

static const float want[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};

static int same_f32(const bfp_tensor *t, const float *w, size_t n)
{
    if (t->nbytes != n * bfp_dtype_size(t->dtype))
        return 0;
    for (size_t i = 0; i < n; i++) {
        float v;
        if (t->dtype == BFP_DTYPE_F32)
            memcpy(&v, (const char *)t->data + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, (const char *)t->data + 2 * i, 2);
            v = t->dtype == BFP_DTYPE_F16 ? bfp_f16_to_f32(h) : bfp_bf16_to_f32(h);
        }
        if (memcmp(&v, &w[i], 4) != 0)
            return 0;
    }
    return 1;
}

static void test_numpy(void)
{
    char err[256];
    bfp_tensor t;
    const char *files[3] = {D "np_f32.npy", D "np_f16_v2.npy", D "np_bf16.npy"};
    const bfp_dtype dts[3] = {BFP_DTYPE_F32, BFP_DTYPE_F16, BFP_DTYPE_BF16};
    for (int i = 0; i < 3; i++) {
        bfp_status st = bfp_tensor_load(files[i], NULL, &t, err, sizeof err);
        OK(st == BFP_OK && t.dtype == dts[i] && t.ndim == 2 && t.shape[0] == 2 &&
               t.shape[1] == 3 && same_f32(&t, want, 6),
           "%s loads with the right dtype, shape and values%s%s", files[i],
           st ? ": " : "", st ? err : "");
        bfp_tensor_free(&t);
    }
    const float s = -2.5f;
    OK(bfp_npy_load(D "np_scalar.npy", &t, err, sizeof err) == BFP_OK && t.ndim == 0 &&
           same_f32(&t, &s, 1),
       "numpy 0-d array");
    bfp_tensor_free(&t);
}

static void test_safetensors(void)
{
    char err[256];
    bfp_tensor t;
    OK(bfp_safetensors_load(D "st_ref.safetensors", NULL, &t, err, sizeof err) == BFP_ERR_ARG,
       "reference file with 3 float tensors needs a name: %s", err);
    OK(bfp_safetensors_load(D "st_ref.safetensors", "w32", &t, err, sizeof err) == BFP_OK &&
           t.dtype == BFP_DTYPE_F32 && t.ndim == 2 && same_f32(&t, want, 6),
       "reference F32 tensor");
    bfp_tensor_free(&t);
    OK(bfp_safetensors_load(D "st_ref.safetensors", "w16", &t, err, sizeof err) == BFP_OK &&
           t.dtype == BFP_DTYPE_F16 && t.ndim == 1 && same_f32(&t, want, 3),
       "reference F16 tensor");
    bfp_tensor_free(&t);
    const float wbf[4] = {-1.0f, -0.5f, 0.5f, 1.0f};
    OK(bfp_safetensors_load(D "st_ref.safetensors", "wbf", &t, err, sizeof err) == BFP_OK &&
           t.dtype == BFP_DTYPE_BF16 && t.shape[0] == 2 && t.shape[1] == 2 &&
           same_f32(&t, wbf, 4),
       "reference BF16 tensor");
    bfp_tensor_free(&t);
    OK(bfp_safetensors_load(D "st_ref.safetensors", "ids", &t, err, sizeof err) == BFP_ERR_DATA,
       "reference U8 tensor is not a float input");
}

static void test_python_container(void)
{
    char err[256];
    bfp_qtensor q;
    float y[40], w[40];
    const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    const float tail[8] = {6, -6, 0.5f, -0.5f, 0, -0.0f, 1.5f, -1.5f};
    for (int i = 0; i < 32; i++)
        w[i] = e2m1[i % 8] / 4;
    memcpy(w + 32, tail, sizeof tail);
    bfp_status st = bfp_qtensor_load(D "py_mxfp4.safetensors", NULL, &q, err, sizeof err);
    OK(st == BFP_OK && q.format == BFP_MXFP4 && q.rows == 1 && q.cols == 40 &&
           q.sizes.codes == 20 && q.sizes.scales == 2,
       "container written by Python per docs/container.md loads%s%s", st ? ": " : "",
       st ? err : "");
    bfp_const_planes p = bfp_qtensor_planes(&q);
    OK(st == BFP_OK && bfp_dequantize_to_f32(q.format, &p, q.rows, q.cols, y) == BFP_OK &&
           memcmp(y, w, sizeof w) == 0,
       "and decodes to the values the doc's layout says");
    bfp_qtensor_free(&q);
}

int main(void)
{
    test_numpy();
    test_safetensors();
    test_python_container();
    return check_summary("test_io_fixtures");
}
