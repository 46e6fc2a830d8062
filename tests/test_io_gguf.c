/*
 * test_io_gguf.c - the GGUF reader on files this test writes itself: every
 * value type in the key/values (nested arrays too), alignment, F32 / BF16
 * tensors, ggml MXFP4 / NVFP4 blocks against the reference, and one clear
 * error (never a crash) for each kind of damage, every truncation included.
 */
#include "test_io_util.h"

#include <math.h>

/* ---- a tiny GGUF writer --------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            exit(2);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void u32(buf *b, uint32_t v)
{
    uint8_t x[4];
    put_le(x, v, 4);
    put(b, x, 4);
}

static void u64(buf *b, uint64_t v)
{
    uint8_t x[8];
    put_le(x, v, 8);
    put(b, x, 8);
}

static void str(buf *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void pad_to(buf *b, size_t align)
{
    static const uint8_t z[256];
    put(b, z, (align - b->n % align) % align);
}

/* A tensor to write: ne in ggml order (ne[0] contiguous). */
typedef struct {
    const char *name;
    uint32_t type;
    uint32_t nd;
    uint64_t ne[9];
    const void *data;
    size_t nbytes;
} tinfo;

enum { ALIGN = 64 };

/* Version v, the key/values of kv (already encoded, nkv of them), tensors. */
static buf gguf(uint32_t v, const buf *kv, uint64_t nkv, const tinfo *t, size_t nt,
                size_t align)
{
    buf b = {0};
    put(&b, "GGUF", 4);
    u32(&b, v);
    u64(&b, nt);
    u64(&b, nkv);
    if (kv)
        put(&b, kv->p, kv->n);
    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        str(&b, t[i].name);
        u32(&b, t[i].nd);
        for (uint32_t d = 0; d < t[i].nd; d++)
            u64(&b, t[i].ne[d]);
        u32(&b, t[i].type);
        u64(&b, off);
        off += (t[i].nbytes + align - 1) / align * align;
    }
    pad_to(&b, align);
    for (size_t i = 0; i < nt; i++) {
        put(&b, t[i].data, t[i].nbytes);
        pad_to(&b, align);
    }
    return b;
}

/* Key/values with every value type: alignment, strings, scalars, arrays of
 * u8 and of strings, and an array of arrays. */
static buf all_kinds_kv(uint64_t *n)
{
    buf kv = {0};
    str(&kv, "general.architecture"), u32(&kv, 8), str(&kv, "test");
    str(&kv, "general.alignment"), u32(&kv, 4), u32(&kv, ALIGN);
    static const uint8_t scalars[] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12};
    static const uint8_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 8, 8};
    for (size_t i = 0; i < sizeof scalars; i++) {
        char key[32];
        uint8_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        snprintf(key, sizeof key, "test.scalar%u", scalars[i]);
        str(&kv, key), u32(&kv, scalars[i]), put(&kv, v, sizes[i]);
    }
    str(&kv, "test.bytes"), u32(&kv, 9), u32(&kv, 0), u64(&kv, 5), put(&kv, "abcde", 5);
    str(&kv, "tokenizer.tokens"), u32(&kv, 9), u32(&kv, 8), u64(&kv, 3);
    str(&kv, "a"), str(&kv, ""), str(&kv, "ccc");
    str(&kv, "test.nested"), u32(&kv, 9), u32(&kv, 9), u64(&kv, 2);
    u32(&kv, 4), u64(&kv, 2), u32(&kv, 7), u32(&kv, 9);
    u32(&kv, 8), u64(&kv, 1), str(&kv, "x");
    *n = 2 + sizeof scalars + 3;
    return kv;
}

/* ---- the test file -------------------------------------------------------- */

#define ROWS 3
#define MX_COLS 64
#define NV_COLS 128

static float f32v[2 * 5];
static uint16_t bf16v[7];
static float xq[ROWS * NV_COLS];
static uint8_t mx_blocks[ROWS * MX_COLS / 32 * 17], nv_blocks[ROWS * NV_COLS / 64 * 36];
static uint8_t q8[34];

/* Planar reference planes of xq for fmt, and their ggml blocks. */
static void make_blocks(bfp_format fmt, size_t cols, uint8_t *blocks, bfp_qtensor *ref)
{
    size_t shape[2] = {ROWS, cols};
    CHECK(bfp_qtensor_alloc(ref, fmt, 2, shape, NULL, 0) == BFP_OK, "alloc");
    bfp_options o;
    bfp_options_init(&o);
    o.nvfp4_no_tensor_scale = fmt == BFP_NVFP4; /* ggml's blocks hold none */
    bfp_planes p = {ref->codes, ref->scales, ref->meta, &ref->tensor_scale};
    CHECK(bfp_quantize_ref(fmt, BFP_DTYPE_F32, xq, ROWS, cols, &o, &p, NULL) == BFP_OK,
          "quantize");
    bfp_const_planes cp = bfp_qtensor_planes(ref);
    CHECK(bfp_planar_to_ggml(fmt, &cp, ROWS, cols, blocks) == BFP_OK, "to ggml");
}

static buf good_file(uint32_t version, tinfo *t, size_t *nt)
{
    uint64_t nkv;
    buf kv = all_kinds_kv(&nkv);
    tinfo tt[] = {
        {"w.f32", 0, 2, {5, 2}, f32v, sizeof f32v},
        {"b.bf16", 30, 1, {7}, bf16v, sizeof bf16v},
        {"q.mx", 39, 2, {MX_COLS, ROWS}, mx_blocks, sizeof mx_blocks},
        {"q.nv", 40, 2, {NV_COLS, ROWS}, nv_blocks, sizeof nv_blocks},
        {"other.q8_0", 8, 1, {32}, q8, sizeof q8},
    };
    memcpy(t, tt, sizeof tt);
    *nt = 5;
    buf b = gguf(version, &kv, nkv, t, *nt, ALIGN);
    free(kv.p);
    return b;
}

static void test_good(void)
{
    tinfo t[5];
    size_t nt;
    char err[512] = "";
    buf b = good_file(3, t, &nt);
    bfp_gguf_index idx;
    bfp_status st = bfp_gguf_list_mem(b.p, b.n, &idx, err, sizeof err);
    OK(st == BFP_OK && idx.version == 3 && idx.count == 5 && idx.alignment == ALIGN &&
           idx.kv_count == 16,
       "list: version 3, 5 tensors, 16 key/values, alignment 64 (%s)", err);
    if (st == BFP_OK) {
        OK(idx.tensors[0].ndim == 2 && idx.tensors[0].shape[0] == 2 &&
               idx.tensors[0].shape[1] == 5 && idx.tensors[0].nbytes == sizeof f32v,
           "ggml ne (5, 2) is the row-major shape 2x5");
        int aligned = 1;
        for (size_t i = 0; i < idx.count; i++)
            aligned &= idx.tensors[i].offset % ALIGN == 0;
        OK(aligned && idx.tensors[4].ggml_type == 8 && idx.tensors[4].nbytes == 0,
           "offsets aligned; an unknown type is listed with no size");
        bfp_gguf_index_free(&idx);
    }

    bfp_tensor ft;
    st = bfp_gguf_parse(b.p, b.n, "w.f32", &ft, err, sizeof err);
    OK(st == BFP_OK && ft.dtype == BFP_DTYPE_F32 && ft.nbytes == sizeof f32v &&
           memcmp(ft.data, f32v, sizeof f32v) == 0,
       "F32 tensor read back exactly (%s)", err);
    bfp_tensor_free(&ft);
    st = bfp_gguf_parse(b.p, b.n, "b.bf16", &ft, err, sizeof err);
    OK(st == BFP_OK && ft.dtype == BFP_DTYPE_BF16 && ft.ndim == 1 && ft.shape[0] == 7 &&
           memcmp(ft.data, bf16v, sizeof bf16v) == 0,
       "BF16 tensor read back exactly");
    bfp_tensor_free(&ft);
    st = bfp_gguf_parse(b.p, b.n, NULL, &ft, err, sizeof err);
    OK(st == BFP_ERR_ARG && strstr(err, "w.f32") && strstr(err, "b.bf16"),
       "no name with two float tensors lists them: %s", err);
    st = bfp_gguf_parse(b.p, b.n, "q.mx", &ft, err, sizeof err);
    OK(st == BFP_ERR_DATA && strstr(err, "MXFP4"), "an MXFP4 tensor is not a float one: %s",
       err);
    st = bfp_gguf_parse(b.p, b.n, "nope", &ft, err, sizeof err);
    OK(st == BFP_ERR_ARG && strstr(err, "no tensor named 'nope'"), "unknown name: %s", err);

    /* the quantized tensors decode as the reference planes they came from */
    bfp_format fmts[2] = {BFP_MXFP4, BFP_NVFP4};
    const char *names[2] = {"q.mx", "q.nv"};
    size_t cols[2] = {MX_COLS, NV_COLS};
    uint8_t *blocks[2] = {mx_blocks, nv_blocks};
    for (int i = 0; i < 2; i++) {
        bfp_qtensor ref, q;
        make_blocks(fmts[i], cols[i], blocks[i], &ref);
        buf b2 = good_file(3, t, &nt);
        st = bfp_gguf_parse_qtensor(b2.p, b2.n, names[i], &q, err, sizeof err);
        int same = st == BFP_OK && q.format == fmts[i] && q.rows == ROWS && q.cols == cols[i];
        if (same) {
            float *a = malloc(ROWS * cols[i] * 4), *c = malloc(ROWS * cols[i] * 4);
            bfp_const_planes pr = bfp_qtensor_planes(&ref), pq = bfp_qtensor_planes(&q);
            same = a && c &&
                   bfp_dequantize_ref(fmts[i], &pr, ROWS, cols[i], BFP_DTYPE_F32, a) == 0 &&
                   bfp_dequantize_ref(fmts[i], &pq, ROWS, cols[i], BFP_DTYPE_F32, c) == 0 &&
                   memcmp(a, c, ROWS * cols[i] * 4) == 0 &&
                   memcmp(ref.scales, q.scales, q.sizes.scales) == 0;
            free(a);
            free(c);
        }
        OK(same, "%s blocks load as the reference planes (%s)", names[i], err);
        bfp_qtensor_free(&ref);
        bfp_qtensor_free(&q);
        free(b2.p);
    }

    /* from a file, also through bfp_tensor_load's .gguf extension */
    const char *path = tpath("model.gguf");
    b = (free(b.p), good_file(2, t, &nt));
    write_raw(path, b.p, b.n);
    st = bfp_tensor_load(path, "w.f32", &ft, err, sizeof err);
    OK(st == BFP_OK && memcmp(ft.data, f32v, sizeof f32v) == 0,
       "version 2 file loads through bfp_tensor_load (%s)", err);
    bfp_tensor_free(&ft);
    bfp_qtensor q;
    st = bfp_gguf_load_qtensor(path, "q.nv", &q, err, sizeof err);
    OK(st == BFP_OK && q.format == BFP_NVFP4 && q.tensor_scale == 1.0f,
       "NVFP4 from a file, tensor scale 1 (%s)", err);
    bfp_qtensor_free(&q);
    st = bfp_gguf_load_qtensor(path, NULL, &q, err, sizeof err);
    OK(st == BFP_ERR_ARG && strstr(err, "q.mx") && strstr(err, "q.nv"),
       "no name with two quantized tensors lists them: %s", err);

    /* Every truncation is a clean BFP_ERR_DATA, up to where the last tensor
     * (of unknown type Q8_0, so of unknown size) starts; from there on the
     * header and q.nv are whole and must load. */
    bfp_gguf_index full;
    uint64_t end_known = b.n;
    if (bfp_gguf_list_mem(b.p, b.n, &full, err, sizeof err) == BFP_OK) {
        end_known = full.tensors[4].offset;
        bfp_gguf_index_free(&full);
    }
    int all = 1;
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, b.p, n);
        bfp_status s1 = bfp_gguf_parse_qtensor(cut, n, "q.nv", &q, err, sizeof err);
        bfp_qtensor_free(&q);
        if (!(n < end_known ? s1 == BFP_ERR_DATA : s1 == BFP_OK)) {
            all = 0;
            fprintf(stderr, "truncation at %zu of %zu: status %d (%s)\n", n, b.n, (int)s1,
                    err);
        }
        free(cut);
    }
    OK(all && end_known < b.n, "all %zu truncations of the file: BFP_ERR_DATA before byte "
       "%llu, whole tensors after", b.n, (unsigned long long)end_known);
    free(b.p);
}

/* A file that must be refused with an error containing want. */
static void refused(const char *what, const buf *b, const char *want)
{
    char err[512] = "";
    bfp_gguf_index idx;
    bfp_status st = bfp_gguf_list_mem(b->p, b->n, &idx, err, sizeof err);
    OK(st == BFP_ERR_DATA && strstr(err, want), "%s: %s", what, err);
    if (st == BFP_OK)
        bfp_gguf_index_free(&idx);
}

static void test_damage(void)
{
    tinfo one = {"t", 0, 1, {4}, f32v, 16};
    buf b;

    b = gguf(3, NULL, 0, &one, 1, 32);
    memcpy(b.p, "GGUX", 4);
    refused("bad magic", &b, "bad magic");
    put_le(b.p, 0x46554747, 4);
    put_le(b.p + 4, 1, 4);
    refused("version 1", &b, "unsupported GGUF version 1");
    put_le(b.p + 4, 0x03000000, 4);
    refused("big-endian", &b, "big-endian");
    put_le(b.p + 4, 3, 4);
    put_le(b.p + 8, (uint64_t)1 << 60, 8);
    refused("huge tensor count", &b, "more than a");
    free(b.p);

    tinfo mis = one;
    buf kv = {0};
    str(&kv, "general.alignment"), u32(&kv, 4), u32(&kv, 48);
    b = gguf(3, &kv, 1, &mis, 1, 32);
    refused("alignment not a power of two", &b, "not a power of two");
    free(b.p), free(kv.p), kv = (buf){0};
    str(&kv, "general.alignment"), u32(&kv, 10), u64(&kv, 64);
    b = gguf(3, &kv, 1, &one, 1, 32);
    refused("alignment of the wrong type", &b, "expected uint32");
    free(b.p), free(kv.p), kv = (buf){0};

    str(&kv, "k"), u32(&kv, 8), u64(&kv, (uint64_t)1 << 62);
    b = gguf(3, &kv, 1, &one, 1, 32);
    refused("string length past the end", &b, "runs past the end");
    free(b.p), free(kv.p), kv = (buf){0};
    str(&kv, "k"), u32(&kv, 9), u32(&kv, 6), u64(&kv, (uint64_t)1 << 62);
    b = gguf(3, &kv, 1, &one, 1, 32);
    refused("array length past the end", &b, "runs past the end");
    free(b.p), free(kv.p), kv = (buf){0};
    str(&kv, "k"), u32(&kv, 13);
    b = gguf(3, &kv, 1, &one, 1, 32);
    refused("unknown value type", &b, "unknown GGUF value type 13");
    free(b.p), free(kv.p), kv = (buf){0};
    str(&kv, "k"), u32(&kv, 9);
    for (int d = 0; d < 10; d++)
        u32(&kv, 9), u64(&kv, 1);
    u32(&kv, 0), u64(&kv, 0);
    b = gguf(3, &kv, 1, &one, 1, 32);
    refused("arrays nested 10 deep", &b, "nested more than");
    free(b.p), free(kv.p), kv = (buf){0};

    tinfo two[2] = {one, one};
    b = gguf(3, NULL, 0, two, 2, 32);
    refused("duplicate tensor name", &b, "appears twice");
    free(b.p);
    tinfo odd = {"m", 39, 2, {48, 1}, mx_blocks, 34};
    b = gguf(3, NULL, 0, &odd, 1, 32);
    refused("MXFP4 rows of 48", &b, "not a multiple of its block of 32");
    free(b.p);
    tinfo big = {"big", 0, 1, {1000}, f32v, 16};
    b = gguf(3, NULL, 0, &big, 1, 32);
    refused("data past the end", &b, "runs past the end of the file");
    free(b.p);
    tinfo fived = {"d5", 0, 9, {1, 1, 1, 1, 1, 1, 1, 1}, f32v, 4};
    b = gguf(3, NULL, 0, &fived, 1, 32);
    refused("9 dimensions", &b, "has 9 dimensions");
    free(b.p);
    tinfo ovf = {"o", 0, 4, {(uint64_t)1 << 32, (uint64_t)1 << 32, (uint64_t)1 << 32, 2},
                 f32v, 4};
    b = gguf(3, NULL, 0, &ovf, 1, 32);
    refused("shape overflow", &b, "overflows");
    free(b.p);
    /* a misaligned offset: rewrite the tensor's offset field (last 8 bytes
     * of its info, right before the padding) to 4 */
    b = gguf(3, NULL, 0, &one, 1, 32);
    size_t info_end = 24 + 8 + 1 + 4 + 8 + 4 + 8;
    put_le(b.p + info_end - 8, 4, 8);
    refused("misaligned offset", &b, "misaligned");
    free(b.p);
    b = (buf){0};
    put(&b, "GGUF", 4);
    refused("too short", &b, "too short");
    free(b.p);
}

int main(void)
{
    tdir_make();
    for (size_t i = 0; i < sizeof f32v / 4; i++)
        f32v[i] = 0.5f * (float)i - 2.0f;
    for (size_t i = 0; i < 7; i++)
        bf16v[i] = bfp_f32_to_bf16((float)i * 1.25f);
    for (size_t i = 0; i < ROWS * NV_COLS; i++)
        xq[i] = sinf((float)i * 0.37f) * (float)(1 + i % 13);
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)i;
    test_good();
    test_damage();
    return check_summary("test_io_gguf");
}
