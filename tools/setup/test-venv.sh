#!/bin/sh
# The Python test environment of `make test`: a venv at $1 with the packages
# of requirements file $2, (re)installed only when the file's sha256 differs
# from the one recorded at the last install.
set -eu
venv=$1
reqs=$2
stamp=$venv/.bfp-requirements.sha256
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "bfp: creating the test environment $venv (python3 -m venv)" >&2
    python3 -m venv "$venv"
fi
echo "bfp: installing $reqs into $venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$reqs"
echo "$want" >"$stamp"
