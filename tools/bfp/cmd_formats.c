/*
 * cmd_formats.c - `bfp formats [--json]`: the format table.
 */
#define _POSIX_C_SOURCE 200809L

#include "cli_util.h"
#include "commands.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

const char cmd_formats_usage[] =
    "usage: bfp formats [--json]\n"
    "\n"
    "List every format: name, block size, bits per value (codes, scales and\n"
    "meta together), element type, scale type, largest finite value, and a\n"
    "short description, in format-table order.\n"
    "\n"
    "  --json      one JSON array of objects instead of the table\n"
    "  -h, --help  this text\n";

static int print_json(void)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        goto nomem;
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        cJSON *o = cJSON_CreateObject();
        if (!o)
            goto nomem;
        cJSON_AddItemToArray(arr, o);
        if (!cJSON_AddStringToObject(o, "name", f->name) ||
            !cJSON_AddNumberToObject(o, "id", (double)f->id) ||
            !cJSON_AddStringToObject(o, "family",
                                     cli_family_name(f->family)) ||
            !cJSON_AddNumberToObject(o, "block", f->block) ||
            !cJSON_AddNumberToObject(o, "elem_bits", f->elem_bits) ||
            !cJSON_AddNumberToObject(o, "bits_per_value", f->bits_per_value) ||
            !cJSON_AddStringToObject(o, "element", bfp_elem_name(f->elem)) ||
            !cJSON_AddStringToObject(o, "scale", bfp_scale_name(f->scale)) ||
            !cJSON_AddNumberToObject(o, "scale_bytes", f->scale_bytes) ||
            !cJSON_AddNumberToObject(o, "meta_bytes", f->meta_bytes) ||
            !cJSON_AddBoolToObject(o, "has_tensor_scale",
                                   f->has_tensor_scale) ||
            !cJSON_AddNumberToObject(o, "max_value", f->max_value) ||
            !cJSON_AddStringToObject(o, "description",
                                     f->description ? f->description : ""))
            goto nomem;
    }
    return cli_json_emit(arr, 1);
nomem:
    return cli_json_emit(arr, 0);
}

static void print_table(void)
{
    int wname = (int)strlen("format"), welem = (int)strlen("element"),
        wscale = (int)strlen("scale");
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        int n = (int)strlen(f->name);
        wname = n > wname ? n : wname;
        n = (int)strlen(bfp_elem_name(f->elem));
        welem = n > welem ? n : welem;
        n = (int)strlen(bfp_scale_name(f->scale));
        wscale = n > wscale ? n : wscale;
    }
    printf("%-*s  %5s  %8s  %-*s  %-*s  %10s  %s\n", wname, "format", "block",
           "bits/val", welem, "element", wscale, "scale", "max", "description");
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        printf("%-*s  %5d  %8.2f  %-*s  %-*s  %10.4g  %s\n", wname, f->name,
               f->block, f->bits_per_value, welem, bfp_elem_name(f->elem),
               wscale, bfp_scale_name(f->scale), f->max_value,
               f->description ? f->description : "");
    }
}

int cmd_formats(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    int json = 0, c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON:
            json = 1;
            break;
        case OPT_HELP:
            fputs(cmd_formats_usage, stdout);
            return CLI_EXIT_OK;
        default:
            cli_getopt_fail("formats", c, argv);
            return CLI_EXIT_ERR;
        }
    }
    if (optind < argc) {
        cli_error("formats takes no arguments, got '%s'", argv[optind]);
        return CLI_EXIT_ERR;
    }
    if (json)
        return print_json();
    print_table();
    return CLI_EXIT_OK;
}
