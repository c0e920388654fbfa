#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over the GPU suite (minus the 4.3 GB all-pairs case,
# whose ~2^31 elements would take the sanitizer hours; it ran unsanitized in the same session).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
w=$(mktemp -d)
for tool in memcheck racecheck; do
  echo "### $tool ($(date -u +%H:%M:%S))"
  KILN_CACHE_DIR=$w/$tool $cs --tool $tool --error-exitcode 9 .carry/bin/test_gpu_fp8 "~[all-pairs]" 2>&1 | tail -6
  echo "exit ${PIPESTATUS[0]}"
done
