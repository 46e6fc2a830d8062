/*
 * main.c - the bfp command line: dispatch to one file per command.
 * Exit codes: 0 success, 2 any error (one "bfp: error: ..." line on stderr).
 */
#define _POSIX_C_SOURCE 200809L

#include "cli_util.h"
#include "commands.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
    const char *summary;
} command;


static const command commands[] = {
    {"formats", cmd_formats, cmd_formats_usage,
     "list every format: block, bits/value, element, scale, max value"},
    {"golden", cmd_golden, cmd_golden_usage,
     "quantize a raw binary with the reference and write golden files"},
    {"compare", cmd_compare, cmd_compare_usage,
     "quantization error of a tensor in every format (default: data/*.npy)"},
    {"quantize", cmd_quantize, cmd_quantize_usage,
     "tensor (.npy/.safetensors) to a quantized container"},
    {"dequantize", cmd_dequantize, cmd_dequantize_usage,
     "quantized container back to a float tensor"},
    {"convert", cmd_ckpt, cmd_ckpt_usage,
     "a whole checkpoint into the bfp, compressed-tensors or GGUF layout"},
    {"verify", cmd_verify, cmd_verify_usage,
     "check a kernel's planes against the golden model (exit 1 if they differ)"},
    {"bench", cmd_bench, cmd_bench_usage, "throughput of every format against memcpy"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_help(FILE *out)
{
    fprintf(out,
            "bfp %s - block floating-point formats (MXFP4, NVFP4, HiF4, MX+, "
            "...)\n\n"
            "usage: bfp COMMAND [OPTIONS] [ARGS]\n"
            "       bfp help COMMAND | bfp --help | bfp --version\n\n"
            "commands:\n",
            bfp_version());
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nExit status: 0 on success, 1 when `bfp verify` finds a difference, "
                 "2 on any error.\ndocs/cli.md has examples.\n");
}

static int help_command(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    if (argc > 2) {
        cli_error("help takes one command name");
        return CLI_EXIT_ERR;
    }
    const command *c = find_command(argv[1]);
    if (!c) {
        cli_error("unknown command '%s' (see 'bfp --help')", argv[1]);
        return CLI_EXIT_ERR;
    }
    fputs(c->usage, stdout);
    return CLI_EXIT_OK;
}

/* Output that never reached stdout (a full disk, a closed pipe) is an error. */
static int finish_stdout(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc == CLI_EXIT_OK)
            cli_error("writing to standard output: %s", strerror(errno));
        return CLI_EXIT_ERR;
    }
    return rc;
}

int main(int argc, char **argv)
{
    /* Past a file size limit (ulimit -f) write() must fail with EFBIG, which
     * the atomic writer reports and cleans up after, instead of SIGXFSZ
     * killing us with a temporary file left behind. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        cli_error("no command given (see 'bfp --help')");
        return CLI_EXIT_ERR;
    }
    const char *name = argv[1];
    int rc;
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        print_help(stdout);
        rc = CLI_EXIT_OK;
    } else if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("bfp %s\n", bfp_version());
        rc = CLI_EXIT_OK;
    } else if (strcmp(name, "help") == 0) {
        rc = help_command(argc - 1, argv + 1);
    } else {
        const command *c = find_command(name);
        if (!c) {
            if (name[0] == '-')
                cli_error("unknown option '%s' (see 'bfp --help')", name);
            else
                cli_error("unknown command '%s' (see 'bfp --help')", name);
            return CLI_EXIT_ERR;
        }
        if (cli_apply_environment() != 0)
            return CLI_EXIT_ERR;
        cli_getopt_reset();
        rc = c->run(argc - 1, argv + 1);
    }
    return finish_stdout(rc);
}
