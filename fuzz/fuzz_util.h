/*
 * fuzz_util.h - what the fuzz targets share: reading the fuzzer's bytes as
 * choices and values, and stopping loudly when a property fails (a crash is
 * what libFuzzer and the replay driver both report).
 */
#ifndef BFP_FUZZ_UTIL_H
#define BFP_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fuzzer's input, consumed front to back; past the end it reads zeros. */
typedef struct {
    const uint8_t *p;
    size_t n;
} fz_in;

static inline uint8_t fz_u8(fz_in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint16_t fz_u16(fz_in *in)
{
    uint16_t lo = fz_u8(in);
    return (uint16_t)(lo | (uint16_t)fz_u8(in) << 8);
}

static inline uint32_t fz_u32(fz_in *in)
{
    uint32_t lo = fz_u16(in);
    return lo | (uint32_t)fz_u16(in) << 16;
}

/* Fill dst with the next n bytes, zeros past the end of the input. */
static inline void fz_bytes(fz_in *in, void *dst, size_t n)
{
    size_t k = n < in->n ? n : in->n;
    if (k)
        memcpy(dst, in->p, k);
    if (n > k)
        memset((uint8_t *)dst + k, 0, n - k);
    in->p += k;
    in->n -= k;
}

/* malloc exactly n bytes (at least 1) so ASan sees any byte past them. */
static inline void *fz_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "fuzz: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

#define FZ_CHECK(cond, ...)                                                  \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz property failed at %s:%d: %s\n  ", __FILE__, \
                    __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* BFP_FUZZ_UTIL_H */
