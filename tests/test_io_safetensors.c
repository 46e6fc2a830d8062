/* test_io_safetensors.c - safetensors reading and writing, and rejection of
 * malformed headers. */
#include "test_io_util.h"

/* Write 8-byte length + json (unpadded) + n data bytes. */
static int make_st(const char *path, const char *json, const void *data,
                   size_t n)
{
    size_t hl = strlen(json);
    uint8_t *buf = malloc(8 + hl + n + 1);
    if (!buf)
        return -1;
    put_le(buf, hl, 8);
    memcpy(buf + 8, json, hl);
    if (n)
        memcpy(buf + 8 + hl, data, n);
    int r = write_raw(path, buf, 8 + hl + n);
    free(buf);
    return r;
}

static void test_round_trip(void)
{
    char err[256];
    bfp_tensor t, u;
    float f[6] = {1, 2, 3, 4, 5, -6};
    uint16_t h[6] = {0x3f80, 0x4000, 0xbf80, 0x7fc0, 0, 1};
    bfp_dtype dts[3] = {BFP_DTYPE_F32, BFP_DTYPE_F16, BFP_DTYPE_BF16};
    const char *names[3] = {"F32", "F16", "BF16"};
    for (int c = 0; c < 3; c++) {
        memset(&t, 0, sizeof t);
        t.dtype = dts[c];
        t.ndim = 2;
        t.shape[0] = 3;
        t.shape[1] = 2;
        t.data = c == 0 ? (void *)f : (void *)h;
        t.nbytes = c == 0 ? sizeof f : sizeof h;
        OK(bfp_safetensors_save(tpath("a.safetensors"), "layer.w", &t, 0, err,
                                sizeof err) == BFP_OK,
           "save %s", names[c]);
        OK(bfp_safetensors_load(tpath("a.safetensors"), NULL, &u, err, sizeof err) == BFP_OK &&
               u.dtype == t.dtype && u.ndim == 2 && u.shape[0] == 3 && u.shape[1] == 2 &&
               u.nbytes == t.nbytes && memcmp(u.data, t.data, t.nbytes) == 0,
           "%s round trip is byte-exact", names[c]);
        bfp_tensor_free(&u);
        OK(bfp_safetensors_load(tpath("a.safetensors"), "layer.w", &u, err, sizeof err) == BFP_OK,
           "%s load by name", names[c]);
        bfp_tensor_free(&u);
        if (c == 0) {
            /* Check the bytes: compact JSON padded with spaces to 8. */
            void *raw = NULL;
            size_t rs = 0;
            const char *want = "{\"layer.w\":{\"dtype\":\"F32\",\"shape\":[3,2],"
                               "\"data_offsets\":[0,24]}}";
            bfp_io_read_file(tpath("a.safetensors"), &raw, &rs, err, sizeof err);
            const uint8_t *b = raw;
            size_t hl = 0;
            for (int i = 7; raw && rs >= 8 && i >= 0; i--)
                hl = hl << 8 | b[i];
            size_t wl = strlen(want);
            int pad_ok = hl % 8 == 0 && hl >= wl && rs == 8 + hl + 24;
            for (size_t i = wl; pad_ok && i < hl; i++)
                pad_ok = b[8 + i] == ' ';
            OK(pad_ok && memcmp(b + 8, want, wl) == 0 &&
                   memcmp(b + 8 + hl, f, 24) == 0,
               "file bytes are exactly header + padding + data");
            free(raw);
        }
        unlink(tpath("a.safetensors"));
    }
    t.ndim = 0;
    t.nbytes = 2;
    OK(bfp_safetensors_save(tpath("s.safetensors"), NULL, &t, 0, err, sizeof err) == BFP_OK &&
           bfp_safetensors_load(tpath("s.safetensors"), "tensor", &u, err, sizeof err) == BFP_OK &&
           u.ndim == 0 && u.nbytes == 2,
       "0-d tensor under the default name 'tensor'");
    bfp_tensor_free(&u);
    OK(bfp_safetensors_save(tpath("s.safetensors"), NULL, &t, 0, err, sizeof err) == BFP_ERR_IO,
       "save refuses to overwrite without force");
    unlink(tpath("s.safetensors"));
}

static void test_selection(void)
{
    char err[512];
    bfp_tensor u;
    uint8_t data[64];
    for (int i = 0; i < 64; i++)
        data[i] = (uint8_t)i;
    make_st(tpath("m.safetensors"),
            "{\"__metadata__\":{\"k\":\"v\"},"
            "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]},"
            "\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[16,20]},"
            "\"d\":{\"dtype\":\"F4\",\"shape\":[8],\"data_offsets\":[20,24]},"
            "\"e\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[24,24]}}",
            data, 24);
    OK(bfp_safetensors_load(tpath("m.safetensors"), NULL, &u, err, sizeof err) == BFP_ERR_ARG &&
           strstr(err, " 'a' 'b'"),
       "NULL name with two float tensors lists them: %s", err);
    OK(bfp_safetensors_load(tpath("m.safetensors"), "b", &u, err, sizeof err) == BFP_OK &&
           u.dtype == BFP_DTYPE_BF16 && u.ndim == 2 && u.nbytes == 8 &&
           memcmp(u.data, data + 8, 8) == 0,
       "load by name reads the right bytes (unknown dtype F4 elsewhere tolerated)");
    bfp_tensor_free(&u);
    OK(bfp_safetensors_load(tpath("m.safetensors"), "c", &u, err, sizeof err) == BFP_ERR_DATA,
       "a U8 tensor is not a float tensor: %s", err);
    OK(bfp_safetensors_load(tpath("m.safetensors"), "zz", &u, err, sizeof err) == BFP_ERR_ARG,
       "unknown name: %s", err);
    make_st(tpath("m.safetensors"),
            "{\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
            "\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]}}",
            data, 8);
    OK(bfp_safetensors_load(tpath("m.safetensors"), NULL, &u, err, sizeof err) == BFP_OK &&
           u.dtype == BFP_DTYPE_F16 && memcmp(u.data, data + 4, 4) == 0,
       "NULL name picks the only float tensor");
    bfp_tensor_free(&u);
    make_st(tpath("m.safetensors"), "{\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
            data, 4);
    OK(bfp_safetensors_load(tpath("m.safetensors"), NULL, &u, err, sizeof err) == BFP_ERR_DATA,
       "no float tensor at all: %s", err);
    make_st(tpath("m.safetensors"), "{}", NULL, 0);
    OK(bfp_safetensors_load(tpath("m.safetensors"), NULL, &u, err, sizeof err) == BFP_ERR_DATA,
       "empty file header {}: %s", err);
    unlink(tpath("m.safetensors"));
}

static void expect_bad(const char *what, const char *json, size_t ndata)
{
    char err[256] = "";
    static uint8_t zeros[64];
    bfp_tensor u;
    make_st(tpath("bad.safetensors"), json, zeros, ndata);
    bfp_status st = bfp_safetensors_load(tpath("bad.safetensors"), "a", &u, err, sizeof err);
    OK(st == BFP_ERR_DATA && u.data == NULL && err[0] && !strchr(err, '\n'),
       "rejects %s: %s", what, err);
    unlink(tpath("bad.safetensors"));
}

#define E(dt, sh, off) "{\"a\":{\"dtype\":\"" dt "\",\"shape\":" sh ",\"data_offsets\":" off "}}"

static void test_malformed(void)
{
    char err[256];
    bfp_tensor u;
    expect_bad("offsets beyond the data", E("F32", "[2]", "[0,8]"), 4);
    expect_bad("begin after end", E("F32", "[0]", "[8,4]"), 8);
    expect_bad("wrong byte length", E("F32", "[3]", "[0,8]"), 8);
    expect_bad("wrong byte length (unknown dtype elsewhere ok, here F16)",
               E("F16", "[2,2]", "[0,4]"), 8);
    expect_bad("offset not an integer", E("F32", "[1]", "[0,4.5]"), 8);
    expect_bad("negative offset", E("F32", "[1]", "[-4,0]"), 8);
    expect_bad("offset 1e300", E("F32", "[1]", "[0,1e300]"), 8);
    expect_bad("three offsets", E("F32", "[1]", "[0,4,8]"), 8);
    expect_bad("offsets as strings", E("F32", "[1]", "[\"0\",\"4\"]"), 8);
    expect_bad("shape with a string", E("F32", "[\"1\"]", "[0,4]"), 8);
    expect_bad("shape with a negative", E("F32", "[-1]", "[0,4]"), 8);
    expect_bad("shape not an array", E("F32", "4", "[0,4]"), 8);
    expect_bad("shape product overflow",
               E("F32", "[4294967296,4294967296,4294967296]", "[0,4]"), 8);
    expect_bad("9 dimensions", E("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]"), 8);
    expect_bad("missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad("entry not an object", "{\"a\":[1,2]}", 4);
    expect_bad("header not an object", "[1,2]", 4);
    expect_bad("bad JSON", "{\"a\":{\"dtype\":\"F32\",", 4);
    expect_bad("junk after JSON", "{}xyz", 4);
    expect_bad("non-string metadata",
               "{\"__metadata__\":{\"k\":1},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad("metadata not an object", "{\"__metadata__\":[]}", 4);
    expect_bad("duplicate tensor name",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad("names that differ only after a NUL",
               "{\"a\\u0000x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\\u0000y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad("a NUL in a metadata value",
               "{\"__metadata__\":{\"k\":\"v\\u0000\"},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad("deeply nested JSON",
               "{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 4);

    make_st(tpath("nul.safetensors"),
            "{\"a\\u0000x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
            (const uint8_t *)"\0\0\0\0", 4);
    err[0] = '\0';
    bfp_safetensors_load(tpath("nul.safetensors"), NULL, &u, err, sizeof err);
    OK(strstr(err, "NUL character") != NULL, "a NUL in a name is named as such: %s", err);
    unlink(tpath("nul.safetensors"));

    /* the cap on the header length, also when the file is larger */
    uint8_t cap[16];
    put_le(cap, 100000001, 8);
    memcpy(cap + 8, "{}      ", 8);
    write_raw(tpath("cap.safetensors"), cap, 16);
    OK(bfp_safetensors_load(tpath("cap.safetensors"), NULL, &u, err, sizeof err) == BFP_ERR_DATA &&
           strstr(err, "exceeds the cap of 100000000 bytes"),
       "a header over the cap names the cap: %s", err);
    unlink(tpath("cap.safetensors"));

    /* header length field itself */
    uint8_t b[32] = {0};
    const uint64_t lens[4] = {24, 1, 0xffffffffffffffffull, 1ull << 40};
    for (int i = 0; i < 4; i++) {
        put_le(b, lens[i], 8);
        memcpy(b + 8, "{}      ", 8);
        write_raw(tpath("h.safetensors"), b, 16);
        OK(bfp_safetensors_load(tpath("h.safetensors"), NULL, &u, err, sizeof err) == BFP_ERR_DATA,
           "rejects header length %llu: %s", (unsigned long long)lens[i], err);
    }
    for (size_t n = 0; n < 8; n++) {
        write_raw(tpath("h.safetensors"), b, n);
        if (bfp_safetensors_load(tpath("h.safetensors"), NULL, &u, err, sizeof err) != BFP_ERR_DATA)
            CHECK(0, "a %zu-byte file was accepted", n);
    }
    OK(1, "rejects files shorter than the length field");
    unlink(tpath("h.safetensors"));

    /* every truncation of a valid file fails cleanly */
    float f[4] = {1, 2, 3, 4};
    bfp_tensor t;
    void *raw = NULL;
    size_t rs = 0;
    int bad = 0;
    memset(&t, 0, sizeof t);
    t.dtype = BFP_DTYPE_F32;
    t.ndim = 1;
    t.shape[0] = 4;
    t.data = f;
    t.nbytes = sizeof f;
    bfp_safetensors_save(tpath("full.safetensors"), "a", &t, 0, err, sizeof err);
    bfp_io_read_file(tpath("full.safetensors"), &raw, &rs, err, sizeof err);
    for (size_t n = 0; n < rs; n++) {
        write_raw(tpath("cut.safetensors"), raw, n);
        if (bfp_safetensors_load(tpath("cut.safetensors"), NULL, &u, err, sizeof err) != BFP_ERR_DATA)
            bad++;
    }
    OK(rs > 0 && bad == 0, "all %zu truncations rejected", rs);
    free(raw);
    unlink(tpath("full.safetensors"));
    unlink(tpath("cut.safetensors"));
}

int main(void)
{
    tdir_make();
    test_round_trip();
    test_selection();
    test_malformed();
    return check_summary("test_io_safetensors");
}
