/*
 * test_io_parse_mem.c - the in-memory entry points (bfp_npy_parse,
 * bfp_safetensors_parse, bfp_qtensor_parse) give what the file loaders give
 * for the fixtures in tests/io_data, and refuse every truncation of them
 * with BFP_ERR_DATA and a message.
 */
#include "test_io_util.h"

static int read_all(const char *path, void **data, size_t *size)
{
    char err[256];
    return bfp_io_read_file(path, data, size, err, sizeof err) == BFP_OK;
}

static int same_tensor(const bfp_tensor *a, const bfp_tensor *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes &&
           memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
           (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

typedef bfp_status (*float_parser)(const void *, size_t, bfp_tensor *, char *, size_t);

/* st_ref.safetensors holds w32, wbf, w16 (and U8 ids): the BF16 one */
static const char *st_name;

static bfp_status st_parse_named(const void *b, size_t n, bfp_tensor *t, char *e, size_t el)
{
    return bfp_safetensors_parse(b, n, st_name, t, e, el);
}

static void float_case(const char *path, float_parser parse, const char *what)
{
    void *buf;
    size_t n;
    char err[512] = "";
    bfp_tensor a, b;
    if (!read_all(path, &buf, &n)) {
        CHECK(0, "cannot read %s", path);
        return;
    }
    bfp_status sa = bfp_tensor_load(path, st_name, &a, err, sizeof err);
    bfp_status sb = parse(buf, n, &b, err, sizeof err);
    OK(sa == BFP_OK && sb == BFP_OK && same_tensor(&a, &b), "%s: %s from memory = from the file",
       what, path);
    bfp_tensor_free(&a);
    bfp_tensor_free(&b);
    int all = 1;
    for (size_t k = 0; k < n; k++) {
        err[0] = '\0';
        bfp_status s = parse(buf, k, &b, err, sizeof err);
        all &= s == BFP_ERR_DATA && err[0] != '\0' && b.data == NULL;
        if (s == BFP_OK)
            bfp_tensor_free(&b);
    }
    OK(all, "%s: all %zu truncations of %s refused with a message", what, n, path);
    free(buf);
}

static void container_case(const char *path)
{
    void *buf;
    size_t n;
    char err[512] = "";
    bfp_qtensor a, b;
    if (!read_all(path, &buf, &n)) {
        CHECK(0, "cannot read %s", path);
        return;
    }
    bfp_status sa = bfp_qtensor_load(path, NULL, &a, err, sizeof err);
    bfp_status sb = bfp_qtensor_parse(buf, n, NULL, &b, err, sizeof err);
    OK(sa == BFP_OK && sb == BFP_OK && a.format == b.format && a.rows == b.rows &&
           a.cols == b.cols && memcmp(a.codes, b.codes, a.sizes.codes) == 0 &&
           memcmp(a.scales, b.scales, a.sizes.scales) == 0,
       "container: %s from memory = from the file (%s)", path, err);
    bfp_qtensor_free(&a);
    bfp_qtensor_free(&b);
    int all = 1;
    for (size_t k = 0; k < n; k++) {
        bfp_status s = bfp_qtensor_parse(buf, k, NULL, &b, err, sizeof err);
        all &= s == BFP_ERR_DATA && b.codes == NULL;
        if (s == BFP_OK)
            bfp_qtensor_free(&b);
    }
    OK(all, "container: all %zu truncations of %s refused", n, path);
    free(buf);
}

int main(void)
{
    float_case("tests/io_data/np_f32.npy", bfp_npy_parse, "npy");
    float_case("tests/io_data/np_bf16.npy", bfp_npy_parse, "npy");
    float_case("tests/io_data/np_f16_v2.npy", bfp_npy_parse, "npy");
    st_name = "wbf";
    float_case("tests/io_data/st_ref.safetensors", st_parse_named, "safetensors");
    container_case("tests/io_data/py_mxfp4.safetensors");
    char err[128] = "";
    bfp_tensor t;
    OK(bfp_npy_parse(NULL, 5, &t, err, sizeof err) == BFP_ERR_ARG, "NULL buffer: %s", err);
    return check_summary("test_io_parse_mem");
}
