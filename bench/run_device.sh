#!/usr/bin/env bash
# The benchmark run on the GPU machine (kiln-bench and its peers), from the repository root:
#   kiln-bench --json, the Triton baseline (kernel times at kiln's shapes; first call cold and warm),
#   the CuPy RawModule peer (same sources, cold and warm), merge_results.py, then the run against
#   the committed baseline of its GPU kind (compare_baseline.py; skipped when there is none).
#
# Usage: bench/run_device.sh [--quick]
#   KILN_BIN   folder holding the kiln and kiln-bench executables (default: .carry/bin); their
#              libkiln must be on LD_LIBRARY_PATH (default: .carry/lib, then /usr/local/cuda/lib64)
#   OUT        where results go (the device tool sets it; default: ./bench-out)
# Writes to $OUT: bench.json, bench.log, triton.json, triton_jit.json, cupy.json, the merged
# <date>-<gpu>.md / .json and compare.txt. About 2-3 minutes (--quick: about 1).
set -euo pipefail

quick=""
iters=100
cupy_runs=3
if [[ "${1:-}" == "--quick" ]]; then
  quick="--quick"
  iters=30
  cupy_runs=1
fi
root=$(pwd)
bin=${KILN_BIN:-$root/.carry/bin}
out=${OUT:-$root/bench-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$root/.carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Why a private cache folder: kiln-bench's in-process parts should not depend on what an earlier
# run left in ~/.cache/kiln (its JIT part makes its own empty folders anyway).
export KILN_CACHE_DIR="$work/kiln-cache"

step() { printf '\n### %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$work/nvidia-smi.csv" || true
"$bin/kiln" --version

step "kiln-bench $quick"
set +e
"$bin/kiln-bench" $quick --json "$out/bench.json" 2>&1 | tee "$out/bench.log"
kiln_status=${PIPESTATUS[0]}
set -e
echo "kiln-bench exit status: $kiln_status"

step "Triton baseline: kernel times"
shapes=""
for m in 1 16 25 128 512 1168 2048 4576 8192 16384 32768; do
  for k in 2048 5120 7168 18432; do shapes+="${shapes:+;}$m,$k"; done
done
python3 bench/triton_fp8_quant.py --shapes "$shapes" --iters "$iters" > "$out/triton.json" || echo "Triton kernel times failed"

step "Triton baseline: first call, cold and warm cache"
python3 bench/triton_fp8_quant.py --cold-warm > "$out/triton_jit.json" || echo "Triton first call failed"

step "CuPy RawModule peer, cold and warm cache"
# The exact sources kiln compiles, as `kiln dump` writes them, and the headers they include.
"$bin/kiln" dump --arch sm_90a --out "$work/src" > /dev/null
cp kernels_src/common/*.cuh "$work/src/"
python3 bench/cupy_jit_peer.py --include "$work/src" --runs "$cupy_runs" \
  --source "$work/src/per_token_group_quant_fp8.sm_90a.cu" --entry per_token_group_quant_fp8 \
  --source "$work/src/fp8_act_quant_hopper.sm_90a.cu" --entry per_token_group_quant_fp8_hopper \
  > "$out/cupy.json" || echo "CuPy peer failed"

step "merge"
python3 bench/merge_results.py --kiln "$out/bench.json" --triton "$out/triton.json" \
  --triton-jit "$out/triton_jit.json" --cupy "$out/cupy.json" --smi "$work/nvidia-smi.csv" --out-dir "$out"

step "against the baseline"
# Why not fatal: a GPU kind without a baseline, or a run that differs, is information, not a failure.
python3 bench/compare_baseline.py --compare "$out/bench.json" > "$out/compare.txt" 2>&1 || true
head -40 "$out/compare.txt"
exit "$kiln_status"
