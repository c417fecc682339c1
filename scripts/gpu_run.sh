#!/usr/bin/env bash
# The GPU window of issue 33 (stage 1) as one command, run from the repository root on the GPU machine after the
# device kit's setup (docs/gpu_window.md has the one device-tool call):
#
#   export GPU_RUN_T0=$(date +%s); source .device-kit/setup.sh && bash scripts/gpu_run.sh
#
# Everything it makes lands in $OUT, the folder the device tool brings back: gpu_run.log (the timeline),
# summary.json, cuda-tests.log, steps.tar.gz (every step's log and report) and workbench-zh-mini.tar.NN (the
# published folder in pieces of at most 15 MiB; `python scripts/gpu_window.py unpack` joins them). The data root
# is the kit's data folder (KIT_DATA). GPU_RUN_MICRO=1 runs the same steps at micro scale on a CPU (a dry run);
# GPU_RUN_WORK names the work folder (default outputs/gpu-window, which must be new).
set -uo pipefail
: "${OUT:?OUT must name the folder that comes back}"
: "${KIT_DATA:?KIT_DATA is unset: source .device-kit/setup.sh first}"
export WORKBENCH_DATA="$KIT_DATA" WORKBENCH_CACHE="${WORKBENCH_CACHE:-/tmp/workbench-cache}"
export GPU_RUN_T0="${GPU_RUN_T0:-$(date +%s)}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
mkdir -p "$OUT"
python3 scripts/gpu_window.py run --out "$OUT" --work-dir "${GPU_RUN_WORK:-outputs/gpu-window}" \
  ${GPU_RUN_MICRO:+--micro} 2>>"$OUT/gpu_run.log"
