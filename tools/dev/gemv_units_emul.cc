/* gemv_units_emul.cc - the grouped GEMV's unit walk (src/cuda/
 * gemm_gemv_units.cuh) on the host. Units are documented as
 * [expert][m chunk][group][chunk], empty experts having none and the count
 * capped at the counters' size; this test lists them in that order by
 * nested loops and checks, for random routings (uniform, skewed, all rows
 * in one expert, empty experts, no rows, capped counts):
 *   - gv_unit(u) gives unit u of the list, for every u;
 *   - gv_next, from each CTA's first unit (as the producer steps) and from a
 *     group's end with ch = chunks (as the consumers step), gives the next.
 * tests/test_cuda_grouped.c on a GPU remains the real check.
 *
 * Built as the ctest test_cuda_gemv_units_emul when CUDA is enabled, or:
 *   g++ -O2 -std=c++17 -Iinclude -Itests -Isrc/core -Isrc/cuda -Itools/dev \
 *       -I/usr/local/cuda/include tools/dev/gemv_units_emul.cc -o /tmp/gue && /tmp/gue
 */
#include <cstdio>
#include <vector>

#include "cuda_host_stubs.h"
#include "gemm_gemv_units.cuh"
#include "prng.h"

using namespace bfpgemm;

struct Unit {
    int e, row0, rows, grp, ch;
    bool operator!=(const Unit &o) const
    {
        return e != o.e || row0 != o.row0 || rows != o.rows || grp != o.grp || ch != o.ch;
    }
};

struct Case {
    int nt, e_count, t_rows, groups, chunks;
    long long cap;
    std::vector<int> offsets, upre;
    std::vector<Unit> list; /* the documented order */
};

/* offsets of t_rows rows over e_count experts: 0 uniform, 1 skewed (most to
 * expert 0), 2 all in one expert, 3 a third of the experts only */
static void route(Case &c, int mode, prng *r)
{
    std::vector<int> cnt(c.e_count, 0);
    const int one = prng_int(r, 0, c.e_count - 1);
    for (int t = 0; t < c.t_rows; t++) {
        int e = prng_int(r, 0, c.e_count - 1);
        if (mode == 1 && prng_int(r, 0, 3))
            e = 0;
        else if (mode == 2)
            e = one;
        else if (mode == 3)
            e = prng_int(r, 0, (c.e_count - 1) / 3);
        cnt[e]++;
    }
    c.offsets.assign(c.e_count + 1, 0);
    for (int e = 0; e < c.e_count; e++)
        c.offsets[e + 1] = c.offsets[e] + cnt[e];
}

static void enumerate(Case &c)
{
    const int mc_rows = 8 * c.nt;
    c.upre.assign(c.e_count + 1, 0);
    c.list.clear();
    for (int e = 0; e < c.e_count; e++) {
        c.upre[e] = (int)std::min((long long)c.list.size(), c.cap);
        const int ra = c.offsets[e], rb = c.offsets[e + 1];
        for (int row0 = ra; row0 < rb; row0 += mc_rows)
            for (int g = 0; g < c.groups; g++)
                for (int ch = 0; ch < c.chunks; ch++)
                    c.list.push_back({e, row0, std::min(mc_rows, rb - row0), g, ch});
    }
    c.upre[c.e_count] = (int)std::min((long long)c.list.size(), c.cap);
}

static GemvArgs args_of(const Case &c)
{
    GemvArgs a{};
    a.chunks = c.chunks;
    a.groups = c.groups;
    a.offsets = c.offsets.data();
    a.e_count = c.e_count;
    a.t_rows = c.t_rows;
    return a;
}

template <int NT> static Unit unit_at(const Case &c, const GemvArgs &a, int u)
{
    Unit v;
    gv_unit<NT>(a, c.upre.data(), u, &v.e, &v.row0, &v.rows, &v.grp, &v.ch);
    return v;
}

template <int NT> static Unit step(const Case &c, const GemvArgs &a, Unit v)
{
    gv_next<NT>(a, c.upre.data(), &v.e, &v.row0, &v.rows, &v.grp, &v.ch);
    return v;
}

/* every unit by index, then each CTA's run of a grid of ctas walked by
 * steps; returns the mismatches (the first few printed) */
template <int NT> static int check(const Case &c, int ctas, int cid)
{
    const GemvArgs a = args_of(c);
    const int total = c.upre[c.e_count];
    int bad = 0;
    auto fail = [&](const char *what, int u, const Unit &got) {
        if (bad++ < 5)
            fprintf(stderr, "case %d (%s) unit %d: got e %d row0 %d rows %d grp %d ch %d\n",
                    cid, what, u, got.e, got.row0, got.rows, got.grp, got.ch);
    };
    for (int u = 0; u < total; u++) {
        const Unit v = unit_at<NT>(c, a, u);
        if (v != c.list[u])
            fail("gv_unit", u, v);
    }
    for (int b = 0; b < ctas; b++) {
        const int u0 = (int)((long long)b * total / ctas);
        const int u1 = (int)((long long)(b + 1) * total / ctas);
        if (u1 <= u0)
            continue;
        Unit v = unit_at<NT>(c, a, u0);
        for (int u = u0 + 1; u < u1; u++) {
            if (v.ch == c.chunks - 1) { /* the consumers' form: ch = chunks */
                Unit w = v;
                w.ch = c.chunks;
                if (step<NT>(c, a, w) != c.list[u])
                    fail("gv_next from ch = chunks", u, step<NT>(c, a, w));
            }
            v = step<NT>(c, a, v);
            if (v != c.list[u])
                fail("gv_next", u, v);
        }
    }
    return bad;
}

int main()
{
    prng r = {0x6e7575ull};
    int cases = 0, failed = 0;
    long long units = 0;
    for (int i = 0; i < 4000; i++) {
        Case c;
        c.nt = prng_int(&r, 1, 2);
        c.e_count = prng_int(&r, 1, 64);
        c.t_rows = prng_int(&r, 0, 3) ? prng_int(&r, 0, 300) : prng_int(&r, 0, 4);
        c.groups = prng_int(&r, 1, 6);
        c.chunks = prng_int(&r, 1, 5);
        route(c, prng_int(&r, 0, 3), &r);
        c.cap = 1ll << 40;
        enumerate(c);
        if (prng_int(&r, 0, 4) == 0) { /* counters for fewer units than routed */
            c.cap = prng_int(&r, 0, (int)c.list.size());
            enumerate(c);
        }
        units += c.upre[c.e_count];
        const int ctas = prng_int(&r, 1, 40);
        const int bad = c.nt == 1 ? check<1>(c, ctas, i) : check<2>(c, ctas, i);
        cases++;
        failed += bad != 0;
    }
    printf("gemv_units_emul: %d of %d cases passed (%lld units)\n", cases - failed, cases, units);
    return failed != 0;
}
