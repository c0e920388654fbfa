#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over the GPU suites: test_gpu_fp8 (minus the 4.3 GB
# all-pairs case, whose ~2^31 elements would take the sanitizer hours; it ran unsanitized in the
# same session) and test_gpu_quant (every kernel of every family variant).
# Prints each passing step's summary and each failing step's whole log; exits 1 if any failed.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
w=$(mktemp -d)
. "$(dirname "$0")/device_steps.sh"
log=$w/sanitize.log
{
  for tool in memcheck racecheck; do
    step "$tool fp8"
    KILN_CACHE_DIR=$w/$tool $cs --tool $tool --error-exitcode 9 .carry/bin/test_gpu_fp8 "~[all-pairs]"
    step_exit $?
    step "$tool quant"
    KILN_CACHE_DIR=$w/$tool $cs --tool $tool --error-exitcode 9 .carry/bin/test_gpu_quant --durations yes
    step_exit $?
  done
} > "$log" 2>&1
steps_report "^###|^exit|(ERROR|RACECHECK) SUMMARY|passed|failed|FAILED" "$log"
