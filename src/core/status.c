/* status.c - status strings (one table) and the library version. */
#include "bfp.h"

#define BFP_STR2(x) #x
#define BFP_STR(x) BFP_STR2(x)

const char *bfp_status_str(bfp_status status)
{
    switch (status) {
    case BFP_OK: return "ok";
    case BFP_ERR_ARG: return "invalid argument";
    case BFP_ERR_FORMAT: return "unknown format";
    case BFP_ERR_SHAPE: return "invalid shape";
    case BFP_ERR_UNSUPPORTED: return "option not supported for this format";
    case BFP_ERR_NOMEM: return "out of memory";
    case BFP_ERR_IO: return "i/o error";
    case BFP_ERR_DATA: return "malformed data";
    case BFP_ERR_DEVICE: return "GPU error";
    }
    return "unknown status";
}

const char *bfp_version(void)
{
    return BFP_STR(BFP_VERSION_MAJOR) "." BFP_STR(BFP_VERSION_MINOR) "." BFP_STR(BFP_VERSION_PATCH);
}
