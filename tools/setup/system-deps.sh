#!/bin/sh
# The Debian packages `make` needs beyond git, make, cmake, a C compiler and
# python3: installs the missing ones when run as root, otherwise stops with
# the one command to run. Not Debian (no dpkg-query): nothing to check here,
# CMake's configure names what it cannot find.
#
#   BFP_DEPS_DRY_RUN=1               print the apt-get commands instead of running them
#   BFP_DEPS_ASSUME_MISSING="a b"    treat these packages as missing (tests this script)
#   BFP_DEPS=skip                    do nothing (you manage the packages yourself)
set -eu

# libcjson-dev: the file layer and the CLI; python3-dev: the extension module;
# python3-venv: the test environment `make test` creates in .venv;
# libopenmpi-dev, openmpi-bin: `mpirun -n N bfp convert` (CMake BFP_MPI=ON)
PACKAGES="libcjson-dev python3-dev python3-venv libopenmpi-dev openmpi-bin"

[ "${BFP_DEPS:-}" = skip ] && exit 0
command -v dpkg-query >/dev/null 2>&1 || exit 0

missing=""
for p in $PACKAGES; do
    case " ${BFP_DEPS_ASSUME_MISSING:-} " in
    *" $p "*) missing="$missing $p"; continue ;;
    esac
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || missing="$missing $p"
done
missing=${missing# }
[ -z "$missing" ] && exit 0

install="apt-get install -y --no-install-recommends $missing"
if [ "$(id -u)" -ne 0 ]; then
    echo "bfp: missing Debian packages: $missing; run: sudo apt-get update && sudo $install" >&2
    exit 1
fi
echo "bfp: installing $missing" >&2
if [ -n "${BFP_DEPS_DRY_RUN:-}" ]; then
    echo "apt-get update"
    echo "$install"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
