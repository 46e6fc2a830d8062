/* minifloat.h - element codecs: value of each code, exact rounding. */
#ifndef BFP_MINIFLOAT_H
#define BFP_MINIFLOAT_H

#include "bfp.h"
#include "format_defs.h"

#include <stdint.h>

typedef enum {
    BFP_GRID_FLOAT = BFP_GK_FLOAT,
    BFP_GRID_INT = BFP_GK_INT,
    BFP_GRID_EXT = BFP_GK_EXT
} bfp_grid_kind;

/* An element code: a sign bit (bit bits-1) and a magnitude index into a
 * monotonic grid of values 0..max_mag. */
typedef struct {
    const char *name;
    bfp_grid_kind kind;
    int bits;      /* code width */
    int mbits;     /* mantissa bits (FLOAT, EXT) or fraction bits (INT) */
    int bias;      /* FLOAT exponent bias */
    int emax;      /* exponent of the largest power of two (MX emax); EXT: the
                      implicit exponent of every value */
    int max_mag;   /* largest finite magnitude index */
} bfp_elem_desc;

/* The grids of format_defs.h, indexed by bfp_elem_type: FLOAT (E2M1, E1M2,
 * E2M3, E3M2, E4M3, E5M2) and INT (INT8, INT4, two's complement) element
 * grids, and their EXT (MX+ block-max) grids: sign + all-mantissa with the
 * exponent fixed at emax, value 2^emax * (1 + i / 2^mbits). */
extern const bfp_elem_desc bfp_elem_grid[BFP_ELEM_ID_LIMIT];
extern const bfp_elem_desc bfp_ext_grid[BFP_ELEM_ID_LIMIT];
#define bfp_e2m1 (bfp_elem_grid[BFP_ELEM_E2M1])
#define bfp_e1m2 (bfp_elem_grid[BFP_ELEM_E1M2])
#define bfp_e2m3 (bfp_elem_grid[BFP_ELEM_E2M3])
#define bfp_e3m2 (bfp_elem_grid[BFP_ELEM_E3M2])
#define bfp_e4m3 (bfp_elem_grid[BFP_ELEM_E4M3])
#define bfp_e5m2 (bfp_elem_grid[BFP_ELEM_E5M2])
#define bfp_int8 (bfp_elem_grid[BFP_ELEM_INT8])
#define bfp_int4 (bfp_elem_grid[BFP_ELEM_INT4])
#define bfp_ext_e2m1 (bfp_ext_grid[BFP_ELEM_E2M1])
#define bfp_ext_e2m3 (bfp_ext_grid[BFP_ELEM_E2M3])
#define bfp_ext_e3m2 (bfp_ext_grid[BFP_ELEM_E3M2])
#define bfp_ext_e4m3 (bfp_ext_grid[BFP_ELEM_E4M3])
#define bfp_ext_e5m2 (bfp_ext_grid[BFP_ELEM_E5M2])
#define bfp_ext_int8 (bfp_ext_grid[BFP_ELEM_INT8])
#define bfp_ext_int4 (bfp_ext_grid[BFP_ELEM_INT4])

const bfp_elem_desc *bfp_elem_desc_for(bfp_elem_type t);

/* Value of magnitude index i (0 <= i <= max_mag). */
double bfp_grid_value(const bfp_elem_desc *e, unsigned i);

/* Magnitude index of a / s rounded to the grid with mode (never DEFAULT),
 * saturating at max_mag. a >= 0 and s > 0 are doubles whose products with
 * grid values are exact; the decision compares a with grid points times s,
 * so the quotient is never rounded first. rbits: stochastic random bits. */
unsigned bfp_grid_round(const bfp_elem_desc *e, double a, double s,
                        bfp_rounding mode, uint32_t rbits);

/* Full code from a sign and a magnitude index (INT: two's complement, so a
 * negative zero is plain 0). */
unsigned bfp_elem_make_code(const bfp_elem_desc *e, int negative, unsigned mag);

/* Signed value of a code; NaN/Inf codes of E4M3/E5M2 give NaN/Inf. */
double bfp_elem_code_value(const bfp_elem_desc *e, unsigned code);

/* 1 if the quantizer can never write this code (NaN/Inf codes, INT -2). */
int bfp_elem_code_is_special(const bfp_elem_desc *e, unsigned code);
/* Whether any code of the grid is special (E2M1, E2M3, E3M2 and E1M2 have none) */
int bfp_elem_has_special(const bfp_elem_desc *e);

/* floor(log2 a) for a finite float a > 0, read from its bits. */
int bfp_floor_log2_f32(float a);

/* floor(log2 a) for a finite double a > 0. */
int bfp_floor_log2(double a);

/* v rounded to nearest-even with `sig` significant bits (v >= 0, finite);
 * values below 2^min_exp round on the grid of 2^(min_exp - sig + 1). */
double bfp_round_sig(double v, int sig, int min_exp);

#endif /* BFP_MINIFLOAT_H */
