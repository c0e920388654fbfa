#!/usr/bin/env bash
# On the GPU machine, from the repository root with the binaries under .carry (see run_device.sh),
# most important first, each step logged under $OUT as it ends (a run cut short keeps what it did):
#   1. the GPU suite's PDL chain test; 2. kiln-bench --only decode (PDL columns and target);
#   3. the family's GPU suite (every variant byte for byte); 4. the FP8 GPU suite in full.
# Prints each passing step's summary lines and each failing step's whole log; exits 1 if any failed.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
B=.carry/bin
w=$(mktemp -d)
. "$(dirname "$0")/device_steps.sh"
{
  step pdl_chain; KILN_CACHE_DIR=$w/c1 $B/test_gpu_fp8 "PDL*" --durations yes; step_exit $?
} > "$OUT/pdl-chain.log" 2>&1
{
  step bench_decode; KILN_CACHE_DIR=$w/c2 $B/kiln-bench --only decode --quick --json "$OUT/bench-decode.json"; step_exit $?
} > "$OUT/bench-decode.log" 2>&1
{
  step gpu_quant; KILN_CACHE_DIR=$w/c3 $B/test_gpu_quant --durations yes; step_exit $?
} > "$OUT/gpu-quant.log" 2>&1
{
  step gpu_fp8; KILN_CACHE_DIR=$w/c1 $B/test_gpu_fp8 --durations yes; step_exit $?
} > "$OUT/gpu-fp8.log" 2>&1
steps_report "^###|^exit|passed|failed|FAILED" "$OUT"/{pdl-chain,bench-decode,gpu-quant,gpu-fp8}.log
