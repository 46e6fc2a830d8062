/* test_io_mutate.c - deterministic mutation fuzzing: valid .npy, safetensors
 * and container files with bytes flipped, runs of bytes replaced and tails
 * cut must load or fail with BFP_ERR_DATA, never crash (run under ASan by
 * `make test`), and anything that loads must be self-consistent. */
#include "test_io_util.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void mutate(uint8_t *b, size_t *n)
{
    static const char *const tokens[] = {"9", "-1", "1e308", "\"", "}", "[", ",",
                                         "18446744073709551616", " ", "\\u0000"};
    int kind = (int)(next() % 4);
    size_t at = *n ? next() % *n : 0;
    if (kind == 0) { /* flip a few bits */
        for (int k = 0; k < 3 && *n; k++)
            b[next() % *n] ^= (uint8_t)(1u << (next() % 8));
    } else if (kind == 1 && *n) { /* random bytes */
        b[at] = (uint8_t)next();
    } else if (kind == 2) { /* JSON-ish token over existing bytes */
        const char *t = tokens[next() % (sizeof tokens / sizeof tokens[0])];
        for (size_t i = 0; t[i] && at + i < *n; i++)
            b[at + i] = (uint8_t)t[i];
    } else { /* cut */
        *n = at;
    }
}

static int run(const char *what, const uint8_t *orig, size_t n0, int iters,
               int (*load)(const char *path, char *err))
{
    uint8_t *b = malloc(n0 + 1);
    int bad = 0;
    char err[256];
    for (int it = 0; it < iters && b; it++) {
        size_t n = n0;
        memcpy(b, orig, n0);
        int muts = 1 + (int)(next() % 3);
        for (int m = 0; m < muts; m++)
            mutate(b, &n);
        write_raw(tpath("m.bin"), b, n);
        if (!load(tpath("m.bin"), err)) {
            if (bad++ < 3)
                fprintf(stderr, "%s mutant %d: %s\n", what, it, err);
        }
    }
    free(b);
    return bad;
}

static int load_npy(const char *p, char *err)
{
    bfp_tensor t;
    bfp_status st = bfp_npy_load(p, &t, err, 256);
    int ok = st == BFP_ERR_DATA ||
             (st == BFP_OK && t.nbytes == bfp_tensor_numel(&t) * bfp_dtype_size(t.dtype));
    bfp_tensor_free(&t);
    return ok;
}

static int load_st(const char *p, char *err)
{
    bfp_tensor t;
    bfp_status st = bfp_safetensors_load(p, NULL, &t, err, 256);
    /* ARG: the mutant renamed or added a tensor so the pick is ambiguous */
    int ok = st == BFP_ERR_DATA || st == BFP_ERR_ARG ||
             (st == BFP_OK && t.nbytes == bfp_tensor_numel(&t) * bfp_dtype_size(t.dtype));
    bfp_tensor_free(&t);
    return ok;
}

static int load_q(const char *p, char *err)
{
    bfp_qtensor q;
    bfp_plane_sizes s;
    bfp_status st = bfp_qtensor_load(p, NULL, &q, err, 256);
    int ok = st == BFP_ERR_DATA || st == BFP_ERR_FORMAT ||
             (st == BFP_OK && bfp_plane_sizes_for(q.format, q.rows, q.cols, &s) == BFP_OK &&
              memcmp(&s, &q.sizes, sizeof s) == 0);
    if (st == BFP_OK) { /* the planes must be safe to decode */
        bfp_const_planes pl = bfp_qtensor_planes(&q);
        float *y = malloc(q.rows * q.cols * sizeof *y);
        ok = ok && y && bfp_dequantize_to_f32(q.format, &pl, q.rows, q.cols, y) == BFP_OK;
        free(y);
    }
    bfp_qtensor_free(&q);
    return ok;
}

static void *slurp(const char *p, size_t *n)
{
    void *d = NULL;
    char err[256];
    if (bfp_io_read_file(p, &d, n, err, sizeof err) != BFP_OK)
        *n = 0;
    return d;
}

int main(void)
{
    char err[256];
    float f[12];
    size_t n;
    for (int i = 0; i < 12; i++)
        f[i] = (float)i - 5.5f;
    bfp_tensor t = {BFP_DTYPE_F32, 2, {3, 4}, f, sizeof f};
    tdir_make();

    bfp_npy_save(tpath("a.npy"), &t, 0, err, sizeof err);
    uint8_t *b = slurp(tpath("a.npy"), &n);
    OK(n > 0 && run("npy", b, n, 2000, load_npy) == 0, "2000 .npy mutants: loaded or BFP_ERR_DATA");
    free(b);

    bfp_safetensors_save(tpath("a.safetensors"), "w", &t, 0, err, sizeof err);
    b = slurp(tpath("a.safetensors"), &n);
    OK(n > 0 && run("safetensors", b, n, 2000, load_st) == 0,
       "2000 safetensors mutants: loaded or a clean error");
    free(b);

    const bfp_format fams[4] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_HIF4};
    for (int i = 0; i < 4; i++) {
        bfp_qtensor q;
        const size_t shape[2] = {2, 70};
        bfp_qtensor_alloc(&q, fams[i], 2, shape, err, sizeof err);
        for (size_t k = 0; k < q.sizes.codes; k++)
            q.codes[k] = (uint8_t)(k * 37);
        bfp_qtensor_save(tpath("q.safetensors"), "t", &q, 1, err, sizeof err);
        bfp_qtensor_free(&q);
        b = slurp(tpath("q.safetensors"), &n);
        OK(n > 0 && run("container", b, n, 1000, load_q) == 0,
           "1000 %s container mutants: loaded consistently or a clean error",
           bfp_format_get(fams[i])->name);
        free(b);
    }
    unlink(tpath("a.npy"));
    unlink(tpath("a.safetensors"));
    unlink(tpath("q.safetensors"));
    unlink(tpath("m.bin"));
    return check_summary("test_io_mutate");
}
