/* emul_check.h - the byte-for-byte plane comparison of the GPU quantizer
 * emulation tests (tools/dev/quant_emul*.cc): every byte counted, the first
 * differences printed with the bf16 input of their block. */
#ifndef BFP_EMUL_CHECK_H
#define BFP_EMUL_CHECK_H
#include <cstddef>
#include <cstdint>
#include <cstdio>

/* Compares n bytes of one plane; *bad counts differences over all planes of
 * a run (the first 6 are printed, after label). block_of(i) is the block of
 * byte i, or SIZE_MAX to print no input; a block is block_elems values of
 * src, and there are nblocks. */
template <class BlockOf>
static inline void emul_compare_plane(const char *label, const char *plane, const uint8_t *ref,
                                      const uint8_t *got, size_t n, BlockOf block_of,
                                      const uint16_t *src, int block_elems, size_t nblocks,
                                      long *checked, long *bad)
{
    for (size_t i = 0; i < n; i++) {
        (*checked)++;
        if (ref[i] == got[i])
            continue;
        if (*bad < 6) {
            size_t blk = block_of(i);
            printf("%s: %s[%zu] got %02x ref %02x", label, plane, i, got[i], ref[i]);
            if (blk < nblocks) {
                printf("  block %zu:", blk);
                for (int j = 0; j < block_elems; j++)
                    printf(" %04x", src[blk * block_elems + j]);
            }
            printf("\n");
        }
        (*bad)++;
    }
}

static inline void emul_compare_nonfinite(const char *name, unsigned long long got, size_t ref,
                                          long *bad)
{
    if (got != ref) {
        printf("%s: non-finite count %llu, ref %zu\n", name, got, ref);
        (*bad)++;
    }
}

#endif
