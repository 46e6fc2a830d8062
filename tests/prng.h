/* prng.h - the tests' fixed-seed PRNG (splitmix64): the same data on every
 * machine and every run. */
#ifndef BFP_TEST_PRNG_H
#define BFP_TEST_PRNG_H

#include <stdint.h>

typedef struct {
    uint64_t s;
} prng;

static inline uint64_t prng_next(prng *p)
{
    uint64_t z = (p->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double prng_unit(prng *p) /* [0, 1) */
{
    return (double)(prng_next(p) >> 11) * 0x1p-53;
}

static inline int prng_int(prng *p, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(prng_next(p) % (uint64_t)(hi - lo + 1));
}

#endif
