#!/usr/bin/env bash
# On the GPU machine, from the repository root with the binaries under .carry (see run_device.sh):
# the GPU suite (with every quantizer variant), the torch check of every variant, the examples' GPU parts, kiln selftest and kiln info into $OUT/gpu-checks.log;
# with the argument `bench`, then bench/run_device.sh into $OUT/bench-run.log.
# Prints each passing step's summary lines and each failing step's whole log; exits 1 if any failed.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
B=.carry/bin
w=$(mktemp -d)
. "$(dirname "$0")/device_steps.sh"
{
step env; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; step_exit $?
step gpu_fp8; KILN_CACHE_DIR=$w/c1 $B/test_gpu_fp8 --durations yes; step_exit $?
step gpu_quant; KILN_CACHE_DIR=$w/c7 $B/test_gpu_quant --durations yes; step_exit $?
step quant_torch; KILN_CACHE_DIR=$w/c7 python3 bench/quant_torch_check.py $PWD/.carry/lib/libkiln.so.0; step_exit $?
step gpu_leaks; KILN_CACHE_DIR=$w/c6 $B/test_gpu_leaks --durations yes; step_exit $?
step example_c; KILN_CACHE_DIR=$w/c2 $B/example_c --gpu; step_exit $?
step example_rust; KILN_CACHE_DIR=$w/c3 $B/example_rust --gpu; step_exit $?
step example_python; KILN_CACHE_DIR=$w/c4 python3 examples/python/quantize.py --lib $PWD/.carry/lib/libkiln.so.0 --gpu; step_exit $?
step selftest; KILN_CACHE_DIR=$w/c5 $B/kiln selftest; step_exit $?
step info; KILN_CACHE_DIR=$w/c5 $B/kiln info; step_exit $?
KILN_CACHE_DIR=$w/c5 $B/kiln info --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d[\"devices\"][0][\"fp8_act_quant\"], d[\"counters\"])"; step_exit $?
} > $OUT/gpu-checks.log 2>&1
logs=("$OUT/gpu-checks.log")
if [ "${1:-}" = bench ]; then
  { step bench; bash bench/run_device.sh; step_exit $?; } > $OUT/bench-run.log 2>&1
  logs+=("$OUT/bench-run.log")
fi
steps_report "^###|exit|passed|failed|FAILED" "${logs[@]}"
status=$?
[ "${1:-}" = bench ] && tail -5 $OUT/bench-run.log
exit $status
