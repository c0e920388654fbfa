#!/usr/bin/env bash
# On the GPU machine, from the repository root with the binaries under .carry (see run_device.sh):
# the GPU suite (with every quantizer variant), the torch check of every variant, the examples' GPU parts, kiln selftest and kiln info into $OUT/gpu-checks.log;
# with the argument `bench`, then bench/run_device.sh.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
B=.carry/bin
w=$(mktemp -d)
step() { printf '\n### %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
{
step env; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step gpu_fp8; KILN_CACHE_DIR=$w/c1 $B/test_gpu_fp8 --durations yes; echo "exit $?"
step gpu_quant; KILN_CACHE_DIR=$w/c7 $B/test_gpu_quant --durations yes; echo "exit $?"
step quant_torch; KILN_CACHE_DIR=$w/c7 python3 bench/quant_torch_check.py $PWD/.carry/lib/libkiln.so.0; echo "exit $?"
step gpu_leaks; KILN_CACHE_DIR=$w/c6 $B/test_gpu_leaks --durations yes; echo "exit $?"
step example_c; KILN_CACHE_DIR=$w/c2 $B/example_c --gpu; echo "exit $?"
step example_rust; KILN_CACHE_DIR=$w/c3 $B/example_rust --gpu; echo "exit $?"
step example_python; KILN_CACHE_DIR=$w/c4 python3 examples/python/quantize.py --lib $PWD/.carry/lib/libkiln.so.0 --gpu; echo "exit $?"
step selftest; KILN_CACHE_DIR=$w/c5 $B/kiln selftest; echo "exit $?"
step info; KILN_CACHE_DIR=$w/c5 $B/kiln info; KILN_CACHE_DIR=$w/c5 $B/kiln info --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d[\"devices\"][0][\"fp8_act_quant\"], d[\"counters\"])"; echo "exit $?"
} > $OUT/gpu-checks.log 2>&1
grep -E "^###|exit|passed|failed|FAILED" $OUT/gpu-checks.log
[ "${1:-}" = bench ] && bash bench/run_device.sh > $OUT/bench-run.log 2>&1; tail -5 $OUT/bench-run.log 2>/dev/null
