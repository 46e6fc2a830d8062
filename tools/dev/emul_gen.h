/* emul_gen.h - test data for the GPU emulation tests (tools/dev/*_emul.cc):
 * a splitmix64 stream and blocks of 32 bf16 values of a random kind (zeros,
 * any bits, NaN/Inf, subnormals, huge, outliers, repeated maxima, grid ties,
 * maxima that round up, powers of two, one tiny value). */
#ifndef BFP_EMUL_GEN_H
#define BFP_EMUL_GEN_H
#include <cstdint>

static uint64_t st = 11; /* the stream's state */
static inline uint64_t rnd()
{
    uint64_t z = (st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint16_t bf(uint32_t sign, int expf, uint32_t man) /* exponent field, clamped */
{
    expf = expf < 0 ? 0 : expf > 254 ? 254 : expf;
    return (uint16_t)(sign << 15 | (uint32_t)expf << 7 | (man & 0x7F));
}

/* one block of 32 bf16 values of a randomly chosen kind */
static inline void gen_block(uint16_t *x)
{
    uint64_t u = rnd();
    int kind = (int)(u % 16);
    int c = (int)((u >> 8) % 270) - 8; /* the block's exponent field, -8..261 clamped */
    int spread = 1 + (int)((u >> 20) % 12);
    for (int i = 0; i < 32; i++) {
        uint64_t v = rnd();
        x[i] = bf((uint32_t)(v & 1), c - (int)((v >> 1) % (uint64_t)spread), (uint32_t)(v >> 8));
    }
    switch (kind) {
    case 0: /* all zero, some -0 */
        for (int i = 0; i < 32; i++)
            x[i] = (rnd() & 3) ? 0 : 0x8000;
        break;
    case 1: /* any bits: NaN, Inf, subnormals anywhere */
        for (int i = 0; i < 32; i++)
            x[i] = (uint16_t)rnd();
        break;
    case 2: { /* one NaN or +-Inf */
        uint64_t v = rnd();
        static const uint16_t sp[4] = {0x7F80, 0xFF80, 0x7FC0, 0xFF81};
        x[v % 32] = sp[(v >> 8) % 4];
        break;
    }
    case 3: /* subnormal and tiny blocks */
        for (int i = 0; i < 32; i++) {
            uint64_t v = rnd();
            x[i] = bf((uint32_t)(v & 1), (int)((v >> 1) % 3), (uint32_t)(v >> 8));
        }
        break;
    case 4: /* huge: near the largest bf16 */
        for (int i = 0; i < 32; i++) {
            uint64_t v = rnd();
            x[i] = bf((uint32_t)(v & 1), 254 - (int)((v >> 1) % 4), (uint32_t)(v >> 8));
        }
        break;
    case 5: { /* an outlier */
        uint64_t v = rnd();
        x[v % 32] = bf((uint32_t)(v >> 5) & 1, c + 2 + (int)((v >> 8) % 20), (uint32_t)(v >> 16));
        break;
    }
    case 6: /* the max repeated, either sign: the BM is the first */
    case 7: {
        uint64_t v = rnd();
        uint16_t m = bf(0, c + 1, (uint32_t)(v >> 8));
        for (int k = 0; k < 2 + (int)(v % 4); k++)
            x[rnd() % 32] = (uint16_t)(m | (rnd() & 1) << 15);
        break;
    }
    case 8: /* few significant bits: many exact ties on the grids */
    case 9:
        for (int i = 0; i < 32; i++)
            x[i] &= (uint16_t)(kind == 8 ? 0xFFF0 : 0xFFC0);
        break;
    case 10: { /* a max whose mantissa rounds up (BM saturation, scale modes' carry) */
        uint64_t v = rnd();
        x[v % 32] = bf((uint32_t)(v >> 5) & 1, c + 1, 0x78 | (uint32_t)(v >> 8));
        break;
    }
    case 11: /* max exactly a power of two */
        x[rnd() % 32] = bf((uint32_t)(rnd() & 1), c + 1, 0);
        break;
    case 12: /* only zeros and one tiny value */
        for (int i = 0; i < 32; i++)
            x[i] = 0;
        x[rnd() % 32] = (uint16_t)(rnd() & 0x80FF);
        break;
    default:
        break;
    }
}

#endif
