/* test_io_npy.c - .npy reading and writing, strict header parsing, and
 * loading by extension. */
#include "test_io_util.h"

/* Build a .npy file from a header dict text and a data blob. */
static int make_npy(const char *path, int major, const char *dict,
                    const void *data, size_t n)
{
    uint8_t buf[4096];
    size_t pre = major == 1 ? 10 : 12, hl = strlen(dict);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    put_le(buf + 8, hl, major == 1 ? 2 : 4);
    memcpy(buf + pre, dict, hl);
    if (n)
        memcpy(buf + pre + hl, data, n);
    return write_raw(path, buf, pre + hl + n);
}

static int has_bytes(const void *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp((const char *)hay + i, needle, k) == 0)
            return 1;
    return 0;
}

static void test_round_trip(void)
{
    char err[256];
    bfp_tensor t, u;
    float f[6] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f};
    uint16_t h[6] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7e00};
    const struct {
        bfp_dtype dt;
        const void *data;
        size_t nb;
        const char *descr;
    } cases[3] = {{BFP_DTYPE_F32, f, sizeof f, "'<f4'"},
                  {BFP_DTYPE_F16, h, sizeof h, "'<f2'"},
                  {BFP_DTYPE_BF16, h, sizeof h, "'<u2'"}};
    for (int c = 0; c < 3; c++) {
        const char *p = tpath("rt.npy");
        memset(&t, 0, sizeof t);
        t.dtype = cases[c].dt;
        t.ndim = 2;
        t.shape[0] = 2;
        t.shape[1] = 3;
        t.data = (void *)cases[c].data;
        t.nbytes = cases[c].nb;
        OK(bfp_npy_save(p, &t, 0, err, sizeof err) == BFP_OK, "save %s",
           cases[c].descr);
        void *raw = NULL;
        size_t rs = 0;
        bfp_io_read_file(p, &raw, &rs, err, sizeof err);
        size_t hl = raw && rs >= 10 ? (size_t)((uint8_t *)raw)[8] | ((size_t)((uint8_t *)raw)[9] << 8) : 0;
        OK(rs == 10 + hl + cases[c].nb && (10 + hl) % 64 == 0 &&
               ((char *)raw)[9 + hl] == '\n',
           "%s header is 64-byte aligned and ends in a newline", cases[c].descr);
        OK(raw && has_bytes(raw, rs, cases[c].descr) &&
               has_bytes(raw, rs, "'shape': (2, 3), }"),
           "%s header names descr and shape", cases[c].descr);
        OK(raw && memcmp((char *)raw + 10 + hl, cases[c].data, cases[c].nb) == 0,
           "%s data bytes follow the header", cases[c].descr);
        free(raw);
        if (cases[c].dt != BFP_DTYPE_BF16) {
            OK(bfp_npy_load(p, &u, err, sizeof err) == BFP_OK && u.dtype == t.dtype &&
                   u.ndim == 2 && u.shape[0] == 2 && u.shape[1] == 3 &&
                   u.nbytes == t.nbytes && memcmp(u.data, t.data, t.nbytes) == 0,
               "%s round trip is byte-exact", cases[c].descr);
            bfp_tensor_free(&u);
        } else {
            /* bf16 goes out as uint16 bits; '<u2' is not a float type */
            OK(bfp_npy_load(p, &u, err, sizeof err) == BFP_ERR_DATA,
               "'<u2' is refused on load: %s", err);
        }
        unlink(p);
    }

    /* bf16 as ml_dtypes writes it, and the 'bfloat16' spelling */
    const char *bf[2] = {"{'descr': '<V2', 'fortran_order': False, 'shape': (2, 3), }\n",
                         "{\"descr\": \"bfloat16\", \"fortran_order\": False, \"shape\": (6,)}"};
    for (int i = 0; i < 2; i++) {
        make_npy(tpath("bf.npy"), 1, bf[i], h, sizeof h);
        OK(bfp_npy_load(tpath("bf.npy"), &u, err, sizeof err) == BFP_OK &&
               u.dtype == BFP_DTYPE_BF16 && u.nbytes == sizeof h &&
               memcmp(u.data, h, sizeof h) == 0,
           "bf16 load (%s)", i ? "bfloat16, double quotes, 1-D" : "<V2");
        bfp_tensor_free(&u);
    }
    unlink(tpath("bf.npy"));

    /* 0-d, 1-d, version 2 and 3 headers */
    make_npy(tpath("s.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f, 4);
    OK(bfp_npy_load(tpath("s.npy"), &u, err, sizeof err) == BFP_OK && u.ndim == 0 &&
           bfp_tensor_numel(&u) == 1 && ((float *)u.data)[0] == 1.0f,
       "0-d array");
    size_t r, c;
    bfp_tensor_rows_cols(&u, &r, &c);
    OK(r == 1 && c == 1, "0-d is 1 x 1");
    bfp_tensor_free(&u);
    for (int v = 2; v <= 3; v++) {
        make_npy(tpath("v.npy"), v, "{'descr':'<f4','fortran_order':False,'shape':(3,)}", f, 12);
        OK(bfp_npy_load(tpath("v.npy"), &u, err, sizeof err) == BFP_OK && u.ndim == 1 &&
               u.shape[0] == 3,
           "version %d.0 header", v);
        bfp_tensor_rows_cols(&u, &r, &c);
        OK(r == 1 && c == 3, "1-D is 1 x n");
        bfp_tensor_free(&u);
    }
    unlink(tpath("s.npy"));
    unlink(tpath("v.npy"));
    OK(bfp_npy_save(tpath("rt.npy"), NULL, 0, err, sizeof err) == BFP_ERR_ARG,
       "save of NULL tensor refused");
    t.dtype = BFP_DTYPE_F32;
    t.nbytes = 7;
    OK(bfp_npy_save(tpath("rt.npy"), &t, 0, err, sizeof err) == BFP_ERR_ARG,
       "save with nbytes not matching shape refused: %s", err);
    OK(tdir_count() == 0, "nothing left behind");
}

static void expect_bad(const char *what, int major, const char *dict,
                       size_t ndata)
{
    char err[256] = "";
    static uint8_t zeros[256];
    bfp_tensor u;
    make_npy(tpath("bad.npy"), major, dict, zeros, ndata);
    bfp_status st = bfp_npy_load(tpath("bad.npy"), &u, err, sizeof err);
    OK(st == BFP_ERR_DATA && u.data == NULL && err[0] && !strchr(err, '\n'),
       "rejects %s: %s", what, err);
    unlink(tpath("bad.npy"));
}

static void test_malformed(void)
{
    char err[256];
    bfp_tensor u;
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
    expect_bad("data one byte short", 1, good, 15);
    expect_bad("data shorter than shape", 1, good, 8);
    expect_bad("data longer than shape", 1, good, 17);
    expect_bad("fortran_order True", 1,
               "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16);
    expect_bad("big-endian '>f4'", 1,
               "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", 16);
    expect_bad("float64", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16);
    expect_bad("uint8", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }", 4);
    expect_bad("structured dtype", 1,
               "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4);
    expect_bad("shape product overflow", 1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }", 0);
    expect_bad("size overflow (numel * 4)", 1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387905,), }", 0);
    expect_bad("dimension over 2^64", 1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0);
    expect_bad("9 dimensions", 1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4);
    expect_bad("1-tuple without comma", 1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", 16);
    expect_bad("negative dimension", 1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", 16);
    expect_bad("missing shape", 1, "{'descr': '<f4', 'fortran_order': False, }", 4);
    expect_bad("unknown key", 1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4);
    expect_bad("duplicate key", 1,
               "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4);
    expect_bad("junk after the dict", 1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4);
    expect_bad("unterminated string", 1, "{'descr': '<f4", 0);
    expect_bad("unterminated dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4);
    expect_bad("fortran_order spelled true", 1,
               "{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", 4);
    expect_bad("fortran_order Falsey", 1,
               "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}", 4);
    expect_bad("escape in string", 1,
               "{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,)}", 4);
    expect_bad("lone brace", 1, "{", 0);
    expect_bad("empty header", 1, "", 0);
    expect_bad("version 4.0", 4, good, 16);

    /* header length beyond the file, bad magic, tiny files */
    uint8_t b[16] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0xff, '{', '}'};
    write_raw(tpath("h.npy"), b, 12);
    OK(bfp_npy_load(tpath("h.npy"), &u, err, sizeof err) == BFP_ERR_DATA,
       "rejects header length beyond the file: %s", err);
    b[6] = 2;
    write_raw(tpath("h.npy"), b, 11);
    OK(bfp_npy_load(tpath("h.npy"), &u, err, sizeof err) == BFP_ERR_DATA,
       "rejects a truncated v2 prefix: %s", err);
    b[1] = 'X';
    write_raw(tpath("h.npy"), b, 16);
    OK(bfp_npy_load(tpath("h.npy"), &u, err, sizeof err) == BFP_ERR_DATA,
       "rejects bad magic: %s", err);
    for (size_t n = 0; n < 10; n++) {
        write_raw(tpath("h.npy"), "\x93NUMPY\x01\x00\x40\x00", n);
        if (bfp_npy_load(tpath("h.npy"), &u, err, sizeof err) != BFP_ERR_DATA)
            CHECK(0, "truncated prefix of %zu bytes accepted", n);
    }
    OK(1, "rejects every truncated prefix");
    unlink(tpath("h.npy"));
    OK(bfp_npy_load(tpath("nope.npy"), &u, err, sizeof err) == BFP_ERR_IO,
       "missing file is an I/O error: %s", err);
}

/* Every truncation of a valid file must fail cleanly. */
static void test_truncations(void)
{
    char err[256];
    bfp_tensor t, u;
    float f[4] = {1, 2, 3, 4};
    void *raw = NULL;
    size_t rs = 0;
    memset(&t, 0, sizeof t);
    t.dtype = BFP_DTYPE_F32;
    t.ndim = 2;
    t.shape[0] = t.shape[1] = 2;
    t.data = f;
    t.nbytes = sizeof f;
    bfp_npy_save(tpath("full.npy"), &t, 0, err, sizeof err);
    bfp_io_read_file(tpath("full.npy"), &raw, &rs, err, sizeof err);
    int bad = 0;
    for (size_t n = 0; n < rs; n++) {
        write_raw(tpath("cut.npy"), raw, n);
        if (bfp_npy_load(tpath("cut.npy"), &u, err, sizeof err) != BFP_ERR_DATA)
            bad++;
    }
    OK(rs > 0 && bad == 0, "all %zu truncations rejected", rs);
    free(raw);
    unlink(tpath("full.npy"));
    unlink(tpath("cut.npy"));
}

static void test_dispatch(void)
{
    char err[256];
    bfp_tensor t, u;
    float f[2] = {5, 6};
    memset(&t, 0, sizeof t);
    t.dtype = BFP_DTYPE_F32;
    t.ndim = 1;
    t.shape[0] = 2;
    t.data = f;
    t.nbytes = 8;
    bfp_npy_save(tpath("UP.NPY"), &t, 0, err, sizeof err);
    OK(bfp_tensor_load(tpath("UP.NPY"), NULL, &u, err, sizeof err) == BFP_OK &&
           u.nbytes == 8 && memcmp(u.data, f, 8) == 0,
       "tensor_load dispatches on .NPY (case-insensitive)");
    bfp_tensor_free(&u);
    OK(bfp_tensor_load(tpath("UP.NPY"), "x", &u, err, sizeof err) == BFP_OK,
       "a name with a .npy file is ignored (it names outputs in the CLI)");
    bfp_tensor_free(&u);
    bfp_safetensors_save(tpath("a.SafeTensors"), "w", &t, 0, err, sizeof err);
    OK(bfp_tensor_load(tpath("a.SafeTensors"), NULL, &u, err, sizeof err) == BFP_OK &&
           u.nbytes == 8 && memcmp(u.data, f, 8) == 0,
       "tensor_load dispatches on .SafeTensors");
    bfp_tensor_free(&u);
    OK(bfp_tensor_load(tpath("x.bin"), NULL, &u, err, sizeof err) == BFP_ERR_ARG &&
           strstr(err, "unknown file type (expected .npy, .safetensors or .gguf)"),
       "other extensions refused: %s", err);
    unlink(tpath("UP.NPY"));
    unlink(tpath("a.SafeTensors"));

    t.ndim = 3;
    t.shape[0] = 2;
    t.shape[1] = 3;
    t.shape[2] = 4;
    size_t r, c;
    bfp_tensor_rows_cols(&t, &r, &c);
    OK(r == 6 && c == 4 && bfp_tensor_numel(&t) == 24, "3-D rows/cols/numel");
    bfp_tensor_free(NULL);
    OK(1, "bfp_tensor_free(NULL) is safe");
}

int main(void)
{
    tdir_make();
    test_round_trip();
    test_malformed();
    test_truncations();
    test_dispatch();
    return check_summary("test_io_npy");
}
