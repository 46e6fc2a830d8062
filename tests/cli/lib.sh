# lib.sh - what every CLI test script starts with; sourced as
#   . "$(dirname "$0")/lib.sh" "$@"
# It takes the bfp binary from the first argument (made absolute: the tests
# change directory), makes a scratch directory $W removed on exit, and
# defines check and the pass / fail counts the script's last lines print.
set -u
BFP=${1:?usage: $(basename "$0") /path/to/bfp}
case $BFP in /*) ;; */*) BFP=$PWD/$BFP ;; esac
W=$(mktemp -d) || exit 2
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
check() { # check DESCRIPTION COMMAND...: one assertion
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; fi
}
