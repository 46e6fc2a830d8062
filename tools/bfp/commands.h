/*
 * commands.h - the bfp subcommands. Each takes its own argv (argv[0] is the
 * command name), returns the process exit code, and has a usage text that
 * "bfp help CMD" and "bfp CMD --help" print.
 */
#ifndef BFP_CLI_COMMANDS_H
#define BFP_CLI_COMMANDS_H

int cmd_formats(int argc, char **argv);
int cmd_golden(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_dequantize(int argc, char **argv);
int cmd_verify(int argc, char **argv);

extern const char cmd_formats_usage[];
extern const char cmd_golden_usage[];
extern const char cmd_compare_usage[];
extern const char cmd_quantize_usage[];
extern const char cmd_dequantize_usage[];
extern const char cmd_verify_usage[];
int cmd_bench(int argc, char **argv); /* cmd_bench.c */
extern const char cmd_bench_usage[];
int cmd_ckpt(int argc, char **argv); /* cmd_ckpt.c: bfp convert */
extern const char cmd_ckpt_usage[];

#endif /* BFP_CLI_COMMANDS_H */
