/*
 * ckpt_gguf_in.c - a GGUF file as the input of `bfp convert --layout gguf`:
 * its tensors join the plan (F32, F16 and BF16 ones may be quantized; every
 * other ggml type is copied, its size from ggml's block table), and its
 * key-values are carried over byte for byte, except the four that the
 * output states again (general.file_type, general.quantization_version,
 * general.alignment, bfp.format).
 */
#define _POSIX_C_SOURCE 200809L

#include "ckpt_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ggml's (values per block, bytes per block), by type id; 0 = unknown. */
static const struct {
    uint32_t blk, bytes;
} ggml_sizes[] = {
    [0] = {1, 4},     [1] = {1, 2},     [2] = {32, 18},   [3] = {32, 20},
    [6] = {32, 22},   [7] = {32, 24},   [8] = {32, 34},   [9] = {32, 40},
    [10] = {256, 84}, [11] = {256, 110}, [12] = {256, 144}, [13] = {256, 176},
    [14] = {256, 210}, [15] = {256, 292}, [16] = {256, 66}, [17] = {256, 74},
    [18] = {256, 98}, [19] = {256, 50}, [20] = {32, 18},  [21] = {256, 110},
    [22] = {256, 82}, [23] = {256, 136}, [24] = {1, 1},   [25] = {1, 2},
    [26] = {1, 4},    [27] = {1, 8},    [28] = {1, 8},    [29] = {256, 56},
    [30] = {1, 2},    [34] = {256, 54}, [35] = {256, 66}, [39] = {32, 17},
    [40] = {64, 36},  [41] = {128, 18},
};

static int ggml_nbytes(uint32_t type, const size_t *shape, size_t ndim, uint64_t *out)
{
    if (type >= sizeof ggml_sizes / sizeof ggml_sizes[0] || !ggml_sizes[type].blk)
        return 0;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        if (!bfpio_mul(n, shape[d], &n))
            return 0;
    if (ndim && shape[ndim - 1] % ggml_sizes[type].blk)
        return 0;
    *out = (uint64_t)(n / ggml_sizes[type].blk) * ggml_sizes[type].bytes;
    return 1;
}

/* Bytes of one GGUF value of type t at p (arrays included), 0 if bad. */
static uint64_t value_len(const uint8_t *p, const uint8_t *end, uint32_t t, int depth)
{
    static const uint8_t fixed[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (t > 12 || depth > 4)
        return 0;
    if (t == 8) {
        if (end - p < 8)
            return 0;
        uint64_t n = bfpio_get_le(p, 8);
        return n <= (uint64_t)(end - p) - 8 ? 8 + n : 0;
    }
    if (t != 9)
        return fixed[t] <= end - p ? fixed[t] : 0;
    if (end - p < 12)
        return 0;
    uint32_t et = (uint32_t)bfpio_get_le(p, 4);
    uint64_t count = bfpio_get_le(p + 4, 8), off = 12;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t l = value_len(p + off, end, et, depth + 1);
        if (!l)
            return 0;
        off += l;
    }
    return off;
}

static int dropped_key(const uint8_t *k, uint64_t n)
{
    static const char *const keys[] = {"general.file_type", "general.quantization_version",
                                       "general.alignment", "bfp.format"};
    for (size_t i = 0; i < 4; i++)
        if (strlen(keys[i]) == n && memcmp(keys[i], k, n) == 0)
            return 1;
    return 0;
}

/* Copy the input's key-values, minus the ones the output restates. */
static bfp_status carry_kvs(ck_plan *p, const uint8_t *map, size_t len,
                            uint64_t nkv, const char *path, char *err, size_t errlen)
{
    const uint8_t *q = map + 24, *end = map + len;
    uint8_t *out = malloc(len > 24 ? len - 24 : 1);
    size_t used = 0;
    if (!out)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    for (uint64_t i = 0; i < nkv; i++) {
        if (end - q < 12)
            goto bad;
        uint64_t kl = bfpio_get_le(q, 8);
        if (kl > (uint64_t)(end - q) - 12)
            goto bad;
        const uint8_t *key = q + 8;
        uint32_t t = (uint32_t)bfpio_get_le(q + 8 + kl, 4);
        uint64_t vl = value_len(q + 12 + kl, end, t, 0);
        if (!vl)
            goto bad;
        uint64_t whole = 12 + kl + vl;
        if (kl == strlen("general.architecture") &&
            memcmp(key, "general.architecture", kl) == 0)
            p->gguf_has_arch = 1;
        if (!dropped_key(key, kl)) {
            memcpy(out + used, q, whole);
            used += whole;
            p->gguf_nkv++;
        }
        q += whole;
    }
    p->gguf_kv = out;
    p->gguf_kv_len = used;
    return BFP_OK;
bad:
    free(out);
    return bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: GGUF key-values are damaged", path);
}

bfp_status ck_add_gguf(ck_plan *p, const char *path, const ck_filters *flt, char *err,
                       size_t errlen)
{
    bfp_gguf_index idx;
    bfp_status st = bfp_gguf_list(path, &idx, err, errlen);
    if (st != BFP_OK)
        return st;
    int fd = open(path, O_RDONLY);
    struct stat sb;
    uint8_t *map = NULL;
    size_t len = 0;
    if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size >= 24) {
        len = (size_t)sb.st_size;
        map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED)
            map = NULL;
    }
    if (fd >= 0)
        close(fd);
    if (!map) {
        bfp_gguf_index_free(&idx);
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot map", path);
    }
    st = carry_kvs(p, map, len, bfpio_get_le(map + 16, 8), path, err, errlen);
    munmap(map, len);
    ck_in *ins = st == BFP_OK ? calloc(idx.count + 1, sizeof *ins) : NULL;
    char **paths = st == BFP_OK ? calloc(1, sizeof *paths) : NULL;
    ck_file *files = st == BFP_OK ? calloc(1, sizeof *files) : NULL;
    if (st == BFP_OK && (!ins || !paths || !files || !(paths[0] = strdup(path))))
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    if (st != BFP_OK) {
        free(ins);
        if (paths)
            free(paths[0]);
        free(paths);
        free(files);
        bfp_gguf_index_free(&idx);
        return st;
    }
    p->ins = ins;
    p->shard_paths = paths;
    p->nshards = 1;
    p->files = files;
    p->nfiles = 1;
    for (size_t i = 0; st == BFP_OK && i < idx.count; i++) {
        const bfp_gguf_tensor *g = &idx.tensors[i];
        ck_in *t = &p->ins[p->nins];
        static const char *const names[] = {[0] = "F32", [1] = "F16", [30] = "BF16",
                                            [24] = "I8", [25] = "I16", [26] = "I32",
                                            [27] = "I64", [28] = "F64"};
        if (!(t->name = strdup(g->name))) {
            st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
            break;
        }
        p->nins++;
        t->ggml_type = g->ggml_type;
        t->shard = 0;
        t->ndim = g->ndim;
        memcpy(t->shape, g->shape, sizeof t->shape);
        t->off = g->offset;
        if (!ggml_nbytes(g->ggml_type, g->shape, g->ndim, &t->nbytes) ||
            t->off > len || t->nbytes > len - t->off) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: tensor '%s' has ggml type %u, which bfp cannot size, "
                            "or lies past the end", path, g->name, g->ggml_type);
            break;
        }
        if (g->ggml_type < sizeof names / sizeof names[0] && names[g->ggml_type])
            snprintf(t->dtype, sizeof t->dtype, "%s", names[g->ggml_type]);
        else
            snprintf(t->dtype, sizeof t->dtype, "GGML%u", g->ggml_type);
        t->has_ggml = 1;
        st = ck_decide(p, t, flt, path, err, errlen);
    }
    p->files[0].first = 0;
    p->files[0].count = p->nins;
    bfp_gguf_index_free(&idx);
    return st;
}
