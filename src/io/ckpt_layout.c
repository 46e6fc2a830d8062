/*
 * ckpt_layout.c - `bfp convert`'s layouts: their names, which formats each
 * stores, and their headers and metadata: the safetensors header of an
 * output shard (bfp and compressed-tensors), the GGUF header,
 * compressed-tensors' quantization_config and the shard index.
 * docs/cli.md ("bfp convert") describes each mapping.
 */
#define _POSIX_C_SOURCE 200809L

#include "ckpt_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_ALIGN 32

static cJSON *raw_uint(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(buf);
}

static int cmp_out(const void *a, const void *b)
{
    const ck_out *x = *(const ck_out *const *)a, *y = *(const ck_out *const *)b;
    size_t ex = bfpio_st_dtype_size(x->dtype), ey = bfpio_st_dtype_size(y->dtype);
    if (ex != ey)
        return ex > ey ? -1 : 1; /* wider types first: they stay aligned */
    return strcmp(x->name, y->name);
}

/* bfp layout: what a reader needs to decode the planes of each tensor. */
static cJSON *bfp_meta(const ck_plan *p, const ck_file *f)
{
    cJSON *m = cJSON_CreateObject(), *q = cJSON_CreateObject();
    char *qtext = NULL;
    if (!m || !q)
        goto fail;
    for (size_t i = f->first; i < f->first + f->count; i++) {
        const ck_in *t = &p->ins[i];
        if (!t->quant)
            continue;
        cJSON *sh = cJSON_CreateArray();
        if (!sh || !cJSON_AddItemToObject(q, t->name, sh)) {
            cJSON_Delete(sh);
            goto fail;
        }
        for (size_t d = 0; d < t->ndim; d++)
            if (!cJSON_AddItemToArray(sh, raw_uint(t->shape[d])))
                goto fail;
    }
    if (!(qtext = cJSON_PrintUnformatted(q)) ||
        !cJSON_AddStringToObject(m, "bfp.layout", "planar-ckpt-v1") ||
        !cJSON_AddStringToObject(m, "bfp.format", bfp_format_get(p->o.format)->name) ||
        !cJSON_AddStringToObject(m, "bfp.quantized", qtext) ||
        !cJSON_AddStringToObject(m, "bfp.version", bfp_version()))
        goto fail;
    free(qtext);
    cJSON_Delete(q);
    return m;
fail:
    free(qtext);
    cJSON_Delete(q);
    cJSON_Delete(m);
    return NULL;
}

static int cmp_out_name(const void *a, const void *b)
{
    return strcmp((*(const ck_out *const *)a)->name, (*(const ck_out *const *)b)->name);
}

bfp_status ck_st_header(const ck_plan *p, ck_file *f, char *err, size_t errlen)
{
    const ck_out **order = malloc((f->nouts + 1) * sizeof *order);
    cJSON *root = cJSON_CreateObject(), *meta = NULL;
    char *text = NULL;
    bfp_status st = BFP_ERR_NOMEM;
    if (!order || !root)
        goto done;
    for (size_t i = 0; i < f->nouts; i++)
        order[i] = &f->outs[i];
    qsort(order, f->nouts, sizeof *order, cmp_out_name);
    for (size_t i = 1; i < f->nouts; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0) { /* "W.codes" given too */
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: the output would hold tensor '%s' twice (an input "
                            "tensor has the name of another's plane)", f->name,
                            order[i]->name);
            free(order);
            cJSON_Delete(root);
            return st;
        }
    qsort(order, f->nouts, sizeof *order, cmp_out);
    meta = p->o.layout == BFP_CKPT_LAYOUT_BFP ? bfp_meta(p, f)
                                              : cJSON_CreateObject();
    if (!meta)
        goto done;
    if (f->in_meta) { /* the input's own keys ("format": "pt") stay */
        const cJSON *it;
        cJSON_ArrayForEach(it, (const cJSON *)f->in_meta)
            if (cJSON_IsString(it) && !cJSON_GetObjectItemCaseSensitive(meta, it->string))
                cJSON_AddStringToObject(meta, it->string, it->valuestring);
    }
    if (!cJSON_GetObjectItemCaseSensitive(meta, "format"))
        cJSON_AddStringToObject(meta, "format", "pt"); /* transformers needs it */
    cJSON_AddItemToObject(root, "__metadata__", meta);
    uint64_t off = 0;
    for (size_t i = 0; i < f->nouts; i++) {
        ck_out *o = (ck_out *)order[i];
        cJSON *e = cJSON_CreateObject(), *sh = cJSON_CreateArray(),
              *offs = cJSON_CreateArray();
        if (!e || !sh || !offs) {
            cJSON_Delete(e);
            cJSON_Delete(sh);
            cJSON_Delete(offs);
            goto done;
        }
        cJSON_AddItemToObject(root, o->name, e);
        cJSON_AddStringToObject(e, "dtype", o->dtype);
        cJSON_AddItemToObject(e, "shape", sh);
        cJSON_AddItemToObject(e, "data_offsets", offs);
        for (size_t d = 0; d < o->ndim; d++)
            cJSON_AddItemToArray(sh, raw_uint(o->shape[d]));
        o->off = off;
        cJSON_AddItemToArray(offs, raw_uint(off));
        off += o->nbytes;
        cJSON_AddItemToArray(offs, raw_uint(off));
    }
    if (!(text = cJSON_PrintUnformatted(root)))
        goto done;
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    free(f->header);
    if (!(f->header = malloc(8 + padded)))
        goto done;
    bfpio_put_le(f->header, padded, 8);
    memcpy(f->header + 8, text, len);
    memset(f->header + 8 + len, ' ', padded - len);
    f->header_len = 8 + padded;
    f->size = f->header_len + off;
    st = BFP_OK;
done:
    if (st != BFP_OK)
        bfpio_fail(st, err, errlen, "out of memory laying out %s", f->name);
    free(text);
    cJSON_Delete(root);
    free(order);
    return st;
}

/* ---- GGUF ---------------------------------------------------------------- */

typedef struct {
    uint8_t *b;
    size_t n, cap;
    int bad;
} gbuf;

static void g_put(gbuf *g, const void *d, size_t n)
{
    if (g->bad)
        return;
    if (g->n + n > g->cap) {
        size_t nc = (g->cap + n) * 2;
        uint8_t *r = realloc(g->b, nc);
        if (!r) {
            g->bad = 1;
            return;
        }
        g->b = r;
        g->cap = nc;
    }
    memcpy(g->b + g->n, d, n);
    g->n += n;
}

static void g_u32(gbuf *g, uint32_t v)
{
    uint8_t b[4];
    bfpio_put_le(b, v, 4);
    g_put(g, b, 4);
}

static void g_u64(gbuf *g, uint64_t v)
{
    uint8_t b[8];
    bfpio_put_le(b, v, 8);
    g_put(g, b, 8);
}

static void g_str(gbuf *g, const char *s)
{
    g_u64(g, strlen(s));
    g_put(g, s, strlen(s));
}

enum { GGUF_T_UINT32 = 4, GGUF_T_STRING = 8 };

static void kv_u32(gbuf *g, const char *k, uint32_t v)
{
    g_str(g, k);
    g_u32(g, GGUF_T_UINT32);
    g_u32(g, v);
}

static void kv_str(gbuf *g, const char *k, const char *v)
{
    g_str(g, k);
    g_u32(g, GGUF_T_STRING);
    g_str(g, v);
}

/* ggml's type id for a copied tensor, or -1. */
static long ggml_type_of(const char *dtype)
{
    static const struct {
        const char *d;
        long t;
    } tab[] = {{"F32", 0}, {"F16", 1}, {"BF16", 30}, {"I8", 24},
               {"I16", 25}, {"I32", 26}, {"I64", 27}, {"F64", 28}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(dtype, tab[i].d) == 0)
            return tab[i].t;
    return -1;
}

bfp_status ck_gguf_header(ck_plan *p, ck_file *f, char *err, size_t errlen)
{
    gbuf g = {0};
    int nvfp4 = p->o.format == BFP_NVFP4;
    uint64_t off = 0;
    g_put(&g, "GGUF", 4);
    g_u32(&g, 3);
    g_u64(&g, f->nouts);
    g_u64(&g, 4 + !p->gguf_has_arch + p->gguf_nkv);
    if (p->gguf_kv_len)
        g_put(&g, p->gguf_kv, p->gguf_kv_len); /* a GGUF input's own */
    if (!p->gguf_has_arch)
        kv_str(&g, "general.architecture", p->arch ? p->arch : "unknown");
    kv_u32(&g, "general.quantization_version", 2);
    kv_u32(&g, "general.file_type", nvfp4 ? 39 : 38); /* MOSTLY_NVFP4 / _MXFP4_MOE */
    kv_u32(&g, "general.alignment", GGUF_ALIGN);
    kv_str(&g, "bfp.format", bfp_format_get(p->o.format)->name);
    for (size_t i = 0; i < f->nouts; i++) {
        ck_out *o = &f->outs[i];
        const ck_in *in = &p->ins[o->src];
        long t = o->role == CK_GGML ? (nvfp4 ? 40 : 39)
                 : in->has_ggml     ? (long)in->ggml_type
                                    : ggml_type_of(o->dtype);
        if (t < 0) {
            free(g.b);
            return bfpio_fail(BFP_ERR_UNSUPPORTED, err, errlen,
                              "%s: tensor '%s' has dtype %s, which GGUF cannot "
                              "store", p->shard_paths[p->ins[o->src].shard],
                              o->name, o->dtype);
        }
        if (o->ndim > 4 || o->ndim == 0) {
            free(g.b);
            return bfpio_fail(BFP_ERR_UNSUPPORTED, err, errlen,
                              "%s: tensor '%s' has %zu dimensions; GGUF holds 1 "
                              "to 4", p->shard_paths[p->ins[o->src].shard],
                              o->name, o->ndim);
        }
        o->ggml_type = (uint32_t)t;
        g_str(&g, o->name);
        g_u32(&g, (uint32_t)o->ndim);
        for (size_t d = o->ndim; d-- > 0;)
            g_u64(&g, o->shape[d]); /* ne[0] is the innermost dimension */
        g_u32(&g, (uint32_t)t);
        o->off = off;
        g_u64(&g, off);
        off += (o->nbytes + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN;
    }
    static const uint8_t zeros[GGUF_ALIGN];
    g_put(&g, zeros, (GGUF_ALIGN - g.n % GGUF_ALIGN) % GGUF_ALIGN);
    if (g.bad) {
        free(g.b);
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    }
    free(f->header);
    f->header = g.b;
    f->header_len = g.n;
    f->size = g.n + off;
    return BFP_OK;
}

/* ---- compressed-tensors ----------------------------------------------- */

uint16_t ck_e8m0_to_bf16_scale(uint8_t e, int shift)
{
    if (e == 0xFF)
        return 0x7FC0;
    if (e >= shift + 1) /* normal: biased exponent (e - 127 - shift) + 127 */
        return (uint16_t)((e - shift) << 7);
    return (uint16_t)(1u << (e + 6 - shift)); /* subnormal: multiples of 2^-133 */
}

int ck_bf16_scale_to_e8m0(uint16_t b, int shift)
{
    for (int e = 0; e < 256; e++)
        if (ck_e8m0_to_bf16_scale((uint8_t)e, shift) == b)
            return e;
    return -1;
}

/* The compressed-tensors format of a bfp format, or NULL. */
const char *ck_ct_format(bfp_format fmt, int *num_bits)
{
    switch (fmt) {
    case BFP_MXFP4:
        *num_bits = 4;
        return "mxfp4-pack-quantized";
    case BFP_NVFP4:
        *num_bits = 4;
        return "nvfp4-pack-quantized";
    case BFP_MXFP6_E2M3:
        *num_bits = 6;
        return "mxfp6-pack-quantized";
    case BFP_MXFP8_E4M3:
        *num_bits = 8;
        return "mxfp8-quantized";
    case BFP_MXINT8:
        *num_bits = 8;
        return "int-quantized";
    case BFP_MXINT4:
        *num_bits = 4;
        return "pack-quantized";
    default:
        return NULL;
    }
}

static cJSON *ct_quant_config(const ck_plan *p)
{
    int bits = 0, nv = p->o.format == BFP_NVFP4;
    const char *fmt = ck_ct_format(p->o.format, &bits);
    cJSON *qc = cJSON_CreateObject(), *groups, *g0, *w, *targets, *ignore;
    if (!qc || !fmt)
        goto fail;
    groups = cJSON_AddObjectToObject(qc, "config_groups");
    g0 = groups ? cJSON_AddObjectToObject(groups, "group_0") : NULL;
    if (!g0)
        goto fail;
    cJSON_AddStringToObject(g0, "format", fmt);
    cJSON_AddNullToObject(g0, "input_activations");
    cJSON_AddNullToObject(g0, "output_activations");
    targets = cJSON_AddArrayToObject(g0, "targets");
    cJSON_AddItemToArray(targets, cJSON_CreateString("Linear"));
    w = cJSON_AddObjectToObject(g0, "weights");
    if (!w)
        goto fail;
    cJSON_AddBoolToObject(w, "dynamic", 0);
    cJSON_AddNumberToObject(w, "group_size", nv ? 16 : 32);
    cJSON_AddNumberToObject(w, "num_bits", bits);
    int mxint = p->o.format == BFP_MXINT8 || p->o.format == BFP_MXINT4;
    cJSON_AddStringToObject(w, "scale_dtype", nv      ? "torch.float8_e4m3fn"
                                              : mxint ? "torch.bfloat16"
                                                      : "torch.uint8");
    cJSON_AddStringToObject(w, "strategy", nv ? "tensor_group" : "group");
    cJSON_AddBoolToObject(w, "symmetric", 1);
    cJSON_AddStringToObject(w, "type", mxint ? "int" : "float");
    cJSON_AddStringToObject(qc, "format", fmt);
    cJSON_AddNullToObject(qc, "global_compression_ratio");
    /* Linear modules left in float: every 2-D MODULE.weight not quantized */
    ignore = cJSON_AddArrayToObject(qc, "ignore");
    for (size_t i = 0; ignore && i < p->nins; i++) {
        const ck_in *t = &p->ins[i];
        size_t n = strlen(t->name);
        if (t->quant || t->ndim != 2 || n < 7 || strcmp(t->name + n - 7, ".weight"))
            continue;
        cJSON *s = cJSON_CreateString(t->name);
        if (!s)
            goto fail;
        s->valuestring[n - 7] = '\0';
        cJSON_AddItemToArray(ignore, s);
    }
    cJSON_AddNullToObject(qc, "kv_cache_scheme");
    cJSON_AddStringToObject(qc, "quant_method", "compressed-tensors");
    cJSON_AddStringToObject(qc, "quantization_status", "compressed");
    cJSON_AddObjectToObject(qc, "sparsity_config");
    cJSON_AddObjectToObject(qc, "transform_config");
    cJSON_AddStringToObject(qc, "version", "0.20.0");
    return qc;
fail:
    cJSON_Delete(qc);
    return NULL;
}

char *ck_ct_config_json(const ck_plan *p, char *err, size_t errlen)
{
    char *path = malloc(strlen(p->in_dir) + 16), *text = NULL, *out = NULL;
    size_t len = 0;
    cJSON *root = NULL, *qc = ct_quant_config(p);
    if (!path || !qc)
        goto done;
    sprintf(path, "%s/config.json", p->in_dir);
    FILE *fp = fopen(path, "rb");
    if (fp) { /* a config.json beside the input: keep all of it */
        fclose(fp);
        if (bfp_io_read_file(path, (void **)&text, &len, err, errlen) != BFP_OK)
            goto done;
        root = cJSON_ParseWithLength(text, len);
        if (!cJSON_IsObject(root)) {
            bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: not a JSON object", path);
            goto done;
        }
    } else if (!(root = cJSON_CreateObject())) {
        goto done;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, "quantization_config");
    cJSON_AddItemToObject(root, "quantization_config", qc);
    qc = NULL;
    out = cJSON_Print(root);
    if (!out)
        bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
done:
    if (!out && err && !*err)
        bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    cJSON_Delete(qc);
    cJSON_Delete(root);
    free(text);
    free(path);
    return out;
}

char *ck_index_json(const ck_plan *p)
{
    cJSON *root = cJSON_CreateObject(), *md, *wm;
    uint64_t total = 0;
    char *out = NULL;
    if (!root || !(md = cJSON_AddObjectToObject(root, "metadata")) ||
        !(wm = cJSON_AddObjectToObject(root, "weight_map")))
        goto done;
    for (size_t k = 0; k < p->nfiles; k++) {
        const ck_file *f = &p->files[k];
        for (size_t i = 0; i < f->nouts; i++) {
            total += f->outs[i].nbytes;
            cJSON_AddStringToObject(wm, f->outs[i].name, f->name);
        }
    }
    cJSON_AddItemToObject(md, "total_size", raw_uint(total));
    out = cJSON_Print(root);
done:
    cJSON_Delete(root);
    return out;
}

const char *bfp_ckpt_layout_name(bfp_ckpt_layout l)
{
    return l == BFP_CKPT_LAYOUT_CT     ? "compressed-tensors"
           : l == BFP_CKPT_LAYOUT_GGUF ? "gguf"
                                       : "bfp";
}

int bfp_ckpt_layout_from_name(const char *s, bfp_ckpt_layout *out)
{
    for (int l = 0; l <= 2; l++)
        if (strcmp(s, bfp_ckpt_layout_name((bfp_ckpt_layout)l)) == 0) {
            *out = (bfp_ckpt_layout)l;
            return 1;
        }
    return 0;
}

int bfp_ckpt_layout_supports(bfp_ckpt_layout l, bfp_format fmt, const char **why)
{
    int bits;
    if (l == BFP_CKPT_LAYOUT_CT && !ck_ct_format(fmt, &bits)) {
        *why = "compressed-tensors stores mxfp4, nvfp4, mxfp6_e2m3, mxfp8_e4m3, "
               "mxint8 and mxint4 only";
        return 0;
    }
    if (l == BFP_CKPT_LAYOUT_GGUF && fmt != BFP_MXFP4 && fmt != BFP_NVFP4) {
        *why = "GGUF stores mxfp4 (ggml type 39) and nvfp4 (type 40) only";
        return 0;
    }
    return 1;
}
