#!/usr/bin/env bash
# bench/e2e_ab.sh - the 8B-shaped decoder (bench/e2e_torch.py) twice in one
# GPU call, with two sets of arguments, so that a setting is compared against
# the same machine's run without it: first bench/h200_check.sh's build and
# e2e step with ARGS_A ($OUT/h200-e2e.json), then e2e_torch.py alone with
# ARGS_B ($OUT/e2e-b.json).
#
#   BFP_CODE=<commit> DEBS=.carry/debs OUT=$OUT bash bench/e2e_ab.sh
#
# Defaults: FORMATS mxfp4,mxfp4@pdl; ARGS_A "--embeddings --fused --profile
# --inductor-pdl", ARGS_B the same without --inductor-pdl; CAP_A / CAP_B
# seconds for each run (default 240 / 200).
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
FORMATS=${FORMATS:-mxfp4,mxfp4@pdl}
ARGS_A=${ARGS_A:---embeddings --fused --profile --inductor-pdl}
ARGS_B=${ARGS_B:---embeddings --fused --profile}
STEPS=e2e E2E_FORMATS=$FORMATS E2E_ARGS="$ARGS_A" E2E_CAP=${CAP_A:-240} \
    bash bench/h200_check.sh 2>&1 | tail -n 4
echo "e2e_ab: first run $(($(date +%s) - T0)) s"
export PYTHONPATH=$PWD/build-h200/python # h200_check.sh's build
# shellcheck disable=SC2086
timeout "${CAP_B:-200}" python3 bench/e2e_torch.py --force --formats "$FORMATS" $ARGS_B \
    --out "${OUT:-$PWD/bench/out}/e2e-b.json" 2>&1 | grep -E "^(bf16|floor|mx|nv|hif)" | cut -c1-400
rc=${PIPESTATUS[0]}
echo "e2e_ab: second run $(($(date +%s) - T0)) s, rc $rc"
exit "$rc"
