/*
 * fuzz_verify_layouts.c - what `bfp verify` reads from another
 * implementation: ggml/GGUF blocks, the HiF4 golden files, the 128x4
 * swizzled scales, and then bfp_verify() itself on any DUT bytes.
 * Properties: no crash or read past a buffer; each converter and its inverse
 * give back the bytes they were given; bfp_verify()'s report is consistent.
 * The last case runs `bfp verify` itself (cmd_verify) on DUT files the
 * fuzzer writes into a scratch directory: its file readers and layout
 * guessing, with any file sizes and bytes.
 * Input: a selector byte, sizes, then the bytes of the layout.
 */
#define _GNU_SOURCE

#include "bfp.h"
#include "cli_util.h"
#include "commands.h"
#include "fuzz_util.h"

#include <fcntl.h>
#include <unistd.h>

static void ggml_case(fz_in *in)
{
    bfp_format fmt = fz_u8(in) & 1 ? BFP_NVFP4 : BFP_MXFP4;
    size_t block = fmt == BFP_NVFP4 ? 64 : 32;
    size_t rows = 1 + fz_u8(in) % 6, cols = block * (1 + fz_u8(in) % 6), bytes;
    if (fz_u8(in) == 0xFF) /* a width that is not whole ggml blocks */
        cols += 1 + fz_u8(in) % (block - 1);
    bfp_status st = bfp_ggml_size(fmt, rows, cols, &bytes);
    if (cols % block) {
        FZ_CHECK(st == BFP_ERR_SHAPE, "ggml size for %zu columns: %d", cols, (int)st);
        return;
    }
    FZ_CHECK(st == BFP_OK, "ggml size %d", (int)st);
    bfp_plane_sizes sz;
    FZ_CHECK(bfp_plane_sizes_for(fmt, rows, cols, &sz) == BFP_OK, "sizes");
    uint8_t *blocks = fz_alloc(bytes), *back = fz_alloc(bytes);
    uint8_t *codes = fz_alloc(sz.codes), *scales = fz_alloc(sz.scales);
    fz_bytes(in, blocks, bytes);
    bfp_planes p = {codes, scales, NULL, NULL};
    FZ_CHECK(bfp_ggml_to_planar(fmt, blocks, rows, cols, &p) == BFP_OK, "to planar");
    bfp_const_planes cp = {codes, scales, NULL, NULL};
    FZ_CHECK(bfp_planar_to_ggml(fmt, &cp, rows, cols, back) == BFP_OK, "to ggml");
    FZ_CHECK(memcmp(blocks, back, bytes) == 0, "ggml %s %zux%zu does not round-trip",
             fmt == BFP_NVFP4 ? "nvfp4" : "mxfp4", rows, cols);
    free(blocks);
    free(back);
    free(codes);
    free(scales);
}

static void hif4_golden_case(fz_in *in)
{
    size_t nb = fz_u8(in) % 64;
    uint8_t *ea = fz_alloc(nb), *eb = fz_alloc(nb), *ec = fz_alloc(2 * nb);
    uint8_t *scales = fz_alloc(4 * nb), *ea2 = fz_alloc(nb), *eb2 = fz_alloc(nb),
            *ec2 = fz_alloc(2 * nb);
    uint16_t *gs = fz_alloc(32 * nb);
    fz_bytes(in, ea, nb);
    fz_bytes(in, eb, nb);
    fz_bytes(in, ec, 2 * nb);
    FZ_CHECK(bfp_hif4_golden_to_scales(ea, eb, ec, nb, scales) == BFP_OK, "golden");
    FZ_CHECK(bfp_hif4_split_scales(scales, nb, ea2, eb2, ec2, gs) == BFP_OK, "split");
    FZ_CHECK(!nb || (memcmp(ea, ea2, nb) == 0 && memcmp(eb, eb2, nb) == 0 &&
                     memcmp(ec, ec2, 2 * nb) == 0),
             "HiF4 golden files of %zu blocks do not round-trip", nb);
    free(ea), free(eb), free(ec), free(scales), free(ea2), free(eb2), free(ec2), free(gs);
}

static void swizzled_case(fz_in *in)
{
    size_t rows = 1 + fz_u16(in) % 300, bpr = 1 + fz_u8(in) % 12;
    size_t n = bfp_swizzled_scales_size(rows, bpr);
    FZ_CHECK(n >= rows * bpr, "swizzled size %zu for %zux%zu", n, rows, bpr);
    uint8_t *sw = fz_alloc(n), *sw2 = fz_alloc(n), *planar = fz_alloc(rows * bpr),
            *planar2 = fz_alloc(rows * bpr);
    fz_bytes(in, sw, n);
    FZ_CHECK(bfp_scales_from_swizzled(sw, rows, bpr, planar) == BFP_OK, "from swizzled");
    FZ_CHECK(bfp_scales_to_swizzled(planar, rows, bpr, sw2) == BFP_OK, "to swizzled");
    FZ_CHECK(bfp_scales_from_swizzled(sw2, rows, bpr, planar2) == BFP_OK, "from swizzled");
    FZ_CHECK(memcmp(planar, planar2, rows * bpr) == 0, "swizzled %zux%zu does not round-trip",
             rows, bpr);
    free(sw), free(sw2), free(planar), free(planar2);
}

/* bfp_verify() of reference planes against arbitrary DUT planes. */
static void verify_case(fz_in *in)
{
    const bfp_format_info *f = bfp_format_at(fz_u8(in) % bfp_format_count());
    size_t rows = 1 + fz_u8(in) % 4, cols = 1 + fz_u8(in) % 200;
    int with_input = fz_u8(in) & 1;
    size_t maxm = fz_u8(in) % 8;
    bfp_plane_sizes sz;
    FZ_CHECK(bfp_plane_sizes_for(f->id, rows, cols, &sz) == BFP_OK, "sizes");
    float *x = fz_alloc(rows * cols * 4);
    fz_bytes(in, x, rows * cols * 4);
    uint8_t *rc = fz_alloc(sz.codes), *rs = fz_alloc(sz.scales), *rm = fz_alloc(sz.meta);
    uint8_t *dc = fz_alloc(sz.codes), *ds = fz_alloc(sz.scales), *dm = fz_alloc(sz.meta);
    float rts = 1.0f, dts = 1.0f;
    bfp_planes rp = {rc, rs, sz.meta ? rm : NULL, &rts};
    FZ_CHECK(bfp_quantize_ref(f->id, BFP_DTYPE_F32, x, rows, cols, NULL, &rp, NULL) == BFP_OK,
             "quantize");
    /* the DUT: the reference with fuzzer bytes XORed in (mostly small diffs) */
    memcpy(dc, rc, sz.codes);
    memcpy(ds, rs, sz.scales);
    memcpy(dm, rm, sz.meta);
    for (size_t i = 0; i < sz.codes; i++)
        dc[i] ^= fz_u8(in);
    for (size_t i = 0; i < sz.scales; i++)
        ds[i] ^= fz_u8(in);
    for (size_t i = 0; i < sz.meta; i++)
        dm[i] ^= fz_u8(in);
    dts = rts;
    if (fz_u8(in) & 1)
        fz_bytes(in, &dts, 4);
    bfp_const_planes ref = {rc, rs, sz.meta ? rm : NULL, &rts};
    bfp_const_planes dut = {dc, ds, sz.meta ? dm : NULL, &dts};
    bfp_verify_mismatch *mm = fz_alloc((maxm ? maxm : 1) * sizeof *mm);
    bfp_verify_report rep;
    FZ_CHECK(bfp_verify(f->id, rows, cols, BFP_DTYPE_F32, with_input ? x : NULL, &ref, &dut,
                        maxm ? mm : NULL, maxm, &rep) == BFP_OK, "verify %s", f->name);
    size_t causes = 0;
    for (int c = 0; c < BFP_VERIFY_NCAUSES; c++)
        causes += rep.cause_count[c];
    FZ_CHECK(causes == rep.mismatches && rep.recorded <= maxm &&
                 rep.recorded <= rep.mismatches && rep.codes_differ <= rep.codes_total &&
                 rep.scales_differ <= rep.scales_total && rep.meta_differ <= rep.meta_total &&
                 rep.blocks_differ <= rep.blocks_total &&
                 rep.identical == (rep.mismatches == 0),
             "%s: inconsistent report (%zu mismatches, %zu by cause, %zu recorded)", f->name,
             rep.mismatches, causes, rep.recorded);
    for (size_t i = 0; i < rep.recorded; i++)
        FZ_CHECK(mm[i].row < rows && (unsigned)mm[i].cause < BFP_VERIFY_NCAUSES &&
                     (mm[i].plane != BFP_PLANE_CODES || mm[i].col < cols),
                 "%s: mismatch %zu out of range", f->name, i);
    free(x), free(rc), free(rs), free(rm), free(dc), free(ds), free(dm), free(mm);
}

static char scratch[64];

static void scratch_remove(void)
{
    static const char *const files[] = {
        "input.bin", "codes.bin", "scales.bin", "meta.bin", "tensor_scale.bin",
        "golden_fp4.bin", "golden_ea.bin", "golden_eb.bin", "golden_ec.bin",
        "golden_scale.bin", "blocks.bin", "scales_swizzled.bin"};
    char p[128];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", scratch, files[i]);
        unlink(p);
    }
}

static void scratch_cleanup(void)
{
    scratch_remove();
    rmdir(scratch);
}

/* `bfp verify` on DUT files of fuzzer-chosen names, sizes and bytes. */
static void cli_case(fz_in *in)
{
    static const char *const names[] = {
        "codes.bin", "scales.bin", "meta.bin", "tensor_scale.bin", "golden_fp4.bin",
        "golden_ea.bin", "golden_eb.bin", "golden_ec.bin", "golden_scale.bin", "blocks.bin",
        "scales_swizzled.bin"};
    static const char *const layouts[] = {"planar", "hif4-golden", "ggml", "swizzled", NULL};
    if (!scratch[0]) {
        strcpy(scratch, "/tmp/bfp_fuzz_verify_XXXXXX");
        if (!mkdtemp(scratch)) {
            scratch[0] = '\0';
            return;
        }
        atexit(scratch_cleanup);
    }
    scratch_remove();
    const bfp_format_info *f = bfp_format_at(fz_u8(in) % bfp_format_count());
    size_t rows = 1 + fz_u8(in) % 4, cols = 1 + fz_u8(in) % 160;
    const char *layout = layouts[fz_u8(in) % 5];
    char path[128], shape[32];
    snprintf(path, sizeof path, "%s/input.bin", scratch);
    float *x = fz_alloc(rows * cols * 4);
    fz_bytes(in, x, rows * cols * 4);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(x);
        return;
    }
    fwrite(x, 4, rows * cols, fp);
    fclose(fp);
    free(x);
    /* up to four DUT files, each of a fuzzer-chosen size */
    for (int k = fz_u8(in) % 5; k > 0; k--) {
        const char *name = names[fz_u8(in) % (sizeof names / sizeof names[0])];
        size_t n = fz_u16(in) % 2048;
        uint8_t *b = fz_alloc(n);
        fz_bytes(in, b, n);
        snprintf(path, sizeof path, "%s/%s", scratch, name);
        if ((fp = fopen(path, "wb"))) {
            fwrite(b, 1, n, fp);
            fclose(fp);
        }
        free(b);
    }
    snprintf(shape, sizeof shape, "%zux%zu", rows, cols);
    snprintf(path, sizeof path, "%s/input.bin", scratch);
    char *argv[12] = {"verify", "-f", (char *)f->name, "-s", shape, "--json", path, scratch};
    int argc = 8;
    if (layout) {
        argv[argc++] = "--layout";
        argv[argc++] = (char *)layout;
    }
    argv[argc] = NULL;
    /* its report and errors are not the fuzzer's business */
    fflush(stdout);
    fflush(stderr);
    int out = dup(1), err = dup(2), null = open("/dev/null", O_WRONLY);
    if (out < 0 || err < 0 || null < 0)
        abort();
    dup2(null, 1);
    dup2(null, 2);
    cli_getopt_reset();
    int rc = cmd_verify(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(out, 1);
    dup2(err, 2);
    close(out), close(err), close(null);
    FZ_CHECK(rc == 0 || rc == 1 || rc == 2, "bfp verify exit status %d", rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    switch (fz_u8(&in) % 5) {
    case 0: ggml_case(&in); break;
    case 1: hif4_golden_case(&in); break;
    case 2: swizzled_case(&in); break;
    case 3: verify_case(&in); break;
    default: cli_case(&in); break;
    }
    return 0;
}
