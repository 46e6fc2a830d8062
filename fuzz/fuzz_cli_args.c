/*
 * fuzz_cli_args.c - the CLI's parsers of shapes, formats, format lists,
 * dtypes, integers and quantization options (tools/bfp/cli_util.c), and
 * whole option lists through getopt as `bfp formats` and `bfp verify` parse
 * them (verify then fails on its missing files: nothing is written).
 * Properties: no crash; what a parser accepts is in range.
 * Input: a selector byte, then NUL-separated strings.
 */
#define _GNU_SOURCE

#include "cli_util.h"
#include "commands.h"
#include "fuzz_util.h"

#define MAX_ARGS 12

static void shape_case(const char *s)
{
    size_t rows = 0, cols = 0;
    if (cli_parse_shape(s, &rows, &cols) == 0)
        FZ_CHECK(rows > 0 && cols > 0 && cols <= SIZE_MAX / rows / 4,
                 "shape '%s' gave %zux%zu", s, rows, cols);
}

static void format_case(const char *s)
{
    bfp_format id;
    bfp_format list[64];
    int n = -1;
    if (cli_parse_format(s, &id) == 0)
        FZ_CHECK(bfp_format_get(id) != NULL, "format '%s' gave id %d", s, (int)id);
    if (cli_parse_format_list(s, list, &n) == 0) {
        FZ_CHECK(n >= 1 && n <= bfp_format_count(), "format list '%s': %d formats", s, n);
        size_t len = strlen(s);
        FZ_CHECK(len > 0 && s[0] != ',' && s[len - 1] != ',' && !strstr(s, ",,"),
                 "format list '%s' with an empty entry accepted", s);
        for (int i = 0; i < n; i++)
            FZ_CHECK(bfp_format_get(list[i]) && (i == 0 || list[i] != list[i - 1]),
                     "format list '%s': entry %d", s, i);
    }
}

static void number_case(const char *s)
{
    uint64_t v;
    bfp_dtype dt;
    (void)cli_parse_u64(s, "--seed", &v);
    if (cli_parse_dtype(s, 1, &dt) == 0)
        FZ_CHECK(bfp_dtype_size(dt) > 0, "dtype '%s'", s);
}

static void options_case(char **argv, int argc)
{
    static const int codes[] = {OPT_ROUNDING, OPT_SEED, OPT_SCALE_MODE, OPT_NO_TENSOR_SCALE,
                                OPT_2D, 'x'};
    cli_quant_opts q;
    cli_quant_opts_init(&q);
    for (int i = 0; i < argc; i++) {
        int c = codes[(unsigned char)argv[i][0] % (sizeof codes / sizeof codes[0])];
        if (cli_quant_opts_parse(&q, c, argv[i]) < 0)
            return;
    }
    for (int i = 0; i < bfp_format_count(); i++)
        (void)cli_quant_opts_check(&q, bfp_format_at(i));
    FZ_CHECK((unsigned)q.opts.rounding <= BFP_ROUND_STOCHASTIC &&
                 (unsigned)q.opts.scale_mode <= BFP_SCALE_FLOOR,
             "options out of range");
}

static void command_case(int which, char **argv, int argc)
{
    char *full[MAX_ARGS + 2];
    full[0] = which ? "verify" : "formats";
    for (int i = 0; i < argc; i++)
        full[i + 1] = argv[i];
    full[argc + 1] = NULL;
    cli_getopt_reset();
    FILE *saved = stdout;
    /* the format table is long; the fuzzer only needs the parse */
    stdout = fopen("/dev/null", "w");
    if (!stdout) {
        stdout = saved;
        return;
    }
    int rc = which ? cmd_verify(argc + 1, full) : cmd_formats(argc + 1, full);
    fclose(stdout);
    stdout = saved;
    FZ_CHECK(rc == CLI_EXIT_OK || rc == 1 || rc == CLI_EXIT_ERR, "exit status %d", rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 4096)
        return 0;
    unsigned sel = data[0];
    /* the rest as NUL-separated strings, each its own exact allocation */
    char *argv[MAX_ARGS];
    int argc = 0;
    size_t i = 1;
    while (i <= size && argc < MAX_ARGS) {
        size_t j = i;
        while (j < size && data[j] != 0)
            j++;
        argv[argc] = fz_alloc(j - i + 1);
        memcpy(argv[argc], data + i, j - i);
        argv[argc][j - i] = '\0';
        argc++;
        i = j + 1;
    }
    switch (sel % 6) {
    case 0: shape_case(argv[0]); break;
    case 1: format_case(argv[0]); break;
    case 2: number_case(argv[0]); break;
    case 3: options_case(argv, argc); break;
    default: command_case(sel % 6 == 5, argv, argc); break;
    }
    for (int k = 0; k < argc; k++)
        free(argv[k]);
    return 0;
}
