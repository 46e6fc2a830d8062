/* x86_quant_table.h - the quantize entries of an x86 kernel file: a thin
 * wrapper per family and dtype (a case per element type), the amax wrappers,
 * and x86_set_quant, which puts them in the kernel table. Included by
 * x86_avx2.c and x86_avx512.c after their q_mx, q_mxplus, q_nvfp4, q_hif4
 * and amax_any (always-inline functions of that file's instruction set), so
 * each file's wrappers are compiled for its own flags. */
#ifndef BFP_X86_QUANT_TABLE_H
#define BFP_X86_QUANT_TABLE_H

#define QARGS const bfp_qparams *p, const void *s, size_t nb, uint8_t *c, uint8_t *sc, \
              uint8_t *m, bfp_stats *st

static inline __attribute__((always_inline)) void q_mx_any(bfp_dtype dt, QARGS)
{
    switch (ks_elem_id(p->impl)) {
    case KS_ID_E2M1: q_mx(KS_E2M1, dt, s, nb, c, sc, st); break;
    case KS_ID_E2M3: q_mx(KS_E2M3, dt, s, nb, c, sc, st); break;
    case KS_ID_E3M2: q_mx(KS_E3M2, dt, s, nb, c, sc, st); break;
    case KS_ID_E4M3: q_mx(KS_E4M3, dt, s, nb, c, sc, st); break;
    case KS_ID_E5M2: q_mx(KS_E5M2, dt, s, nb, c, sc, st); break;
    case KS_ID_INT8: q_mx(KS_INT8, dt, s, nb, c, sc, st); break;
    case KS_ID_INT4: q_mx(KS_INT4, dt, s, nb, c, sc, st); break;
    }
}

static inline __attribute__((always_inline)) void q_mxplus_any(bfp_dtype dt, QARGS)
{
    switch (ks_elem_id(p->impl)) {
    case KS_ID_E2M1: q_mxplus(KS_E2M1, dt, p, s, nb, c, sc, m, st); break;
    case KS_ID_E2M3: q_mxplus(KS_E2M3, dt, p, s, nb, c, sc, m, st); break;
    case KS_ID_E3M2: q_mxplus(KS_E3M2, dt, p, s, nb, c, sc, m, st); break;
    case KS_ID_E4M3: q_mxplus(KS_E4M3, dt, p, s, nb, c, sc, m, st); break;
    case KS_ID_E5M2: q_mxplus(KS_E5M2, dt, p, s, nb, c, sc, m, st); break;
    case KS_ID_INT8: q_mxplus(KS_INT8, dt, p, s, nb, c, sc, m, st); break;
    case KS_ID_INT4: q_mxplus(KS_INT4, dt, p, s, nb, c, sc, m, st); break;
    }
}

static void q_mx_f32(QARGS) { q_mx_any(BFP_DTYPE_F32, p, s, nb, c, sc, m, st); }
static void q_mx_bf16(QARGS) { q_mx_any(BFP_DTYPE_BF16, p, s, nb, c, sc, m, st); }
static void q_mx_f16(QARGS) { q_mx_any(BFP_DTYPE_F16, p, s, nb, c, sc, m, st); }
static void q_mxplus_f32(QARGS) { q_mxplus_any(BFP_DTYPE_F32, p, s, nb, c, sc, m, st); }
static void q_mxplus_bf16(QARGS) { q_mxplus_any(BFP_DTYPE_BF16, p, s, nb, c, sc, m, st); }
static void q_mxplus_f16(QARGS) { q_mxplus_any(BFP_DTYPE_F16, p, s, nb, c, sc, m, st); }
static void q_nvfp4_f32(QARGS) { q_nvfp4(BFP_DTYPE_F32, p, s, nb, c, sc, m, st); }
static void q_nvfp4_bf16(QARGS) { q_nvfp4(BFP_DTYPE_BF16, p, s, nb, c, sc, m, st); }
static void q_nvfp4_f16(QARGS) { q_nvfp4(BFP_DTYPE_F16, p, s, nb, c, sc, m, st); }
static void q_hif4_f32(QARGS) { q_hif4(p, BFP_DTYPE_F32, s, nb, c, sc, st); }
static void q_hif4_bf16(QARGS) { q_hif4(p, BFP_DTYPE_BF16, s, nb, c, sc, st); }
static void q_hif4_f16(QARGS) { q_hif4(p, BFP_DTYPE_F16, s, nb, c, sc, st); }

static float amax_f32(const void *s, size_t n) { return amax_any(BFP_DTYPE_F32, s, n); }
static float amax_bf16(const void *s, size_t n) { return amax_any(BFP_DTYPE_BF16, s, n); }
static float amax_f16(const void *s, size_t n) { return amax_any(BFP_DTYPE_F16, s, n); }

/* The quantize kernels of every format this file covers (the MX element
 * types ks_elem_id knows, NVFP4 / NVFP4+ with E2M1, HiF4), and amax */
static void x86_set_quant(bfp_kernels *k)
{
    for (int id = 1; id < BFP_CPU_NFMT; id++) {
        const bfp_format_impl *impl = bfp_impl_get((bfp_format)id);
        if (!impl)
            continue;
        bfp_qkernel *q = k->quant[id];
        switch (impl->info.family) {
        case BFP_FAMILY_MX:
            if (ks_elem_id(impl) != KS_ID_NONE)
                q[0] = q_mx_f32, q[1] = q_mx_bf16, q[2] = q_mx_f16;
            break;
        case BFP_FAMILY_MX_PLUS:
        case BFP_FAMILY_MX_PP:
            if (ks_elem_id(impl) != KS_ID_NONE)
                q[0] = q_mxplus_f32, q[1] = q_mxplus_bf16, q[2] = q_mxplus_f16;
            break;
        case BFP_FAMILY_NVFP4:
        case BFP_FAMILY_NVFP4_PLUS:
            if (ks_elem_is(impl->elem, KS_E2M1))
                q[0] = q_nvfp4_f32, q[1] = q_nvfp4_bf16, q[2] = q_nvfp4_f16;
            break;
        case BFP_FAMILY_HIF4:
            q[0] = q_hif4_f32, q[1] = q_hif4_bf16, q[2] = q_hif4_f16;
            break;
        }
    }
    k->amax[0] = amax_f32;
    k->amax[1] = amax_bf16;
    k->amax[2] = amax_f16;
}

#endif
