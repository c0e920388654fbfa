#!/usr/bin/env bash
# Builds bench/explore/sglang_compare.cu (kiln's twin beside SGLang's JIT quantizer) from SGLang's own
# wheels, which the build never downloads; fetch them first, on any machine with PyPI:
#   pip download --no-deps sglang==0.5.23 apache-tvm-ffi==0.1.11 -d WHEELS
# Usage: bench/explore/sglang_compare.sh WHEELS OUT_BINARY   (needs nvcc; the binary runs on an sm_90 GPU)
# The SGLang part is compiled as SGLang's load_jit compiles it on an H200: -DSGL_CUDA_ARCH=900,
# -std=c++20 -O3 --expt-relaxed-constexpr --use_fast_math, code for sm_90a.
set -euo pipefail
wheels=${1:?usage: sglang_compare.sh WHEELS OUT_BINARY}
out=${2:?usage: sglang_compare.sh WHEELS OUT_BINARY}
root=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sglang_wheel=$(ls "$wheels"/sglang-0.5.23-*.whl)
tvm_wheel=$(ls "$wheels"/apache_tvm_ffi-0.1.11-*.whl)
unzip -q "$sglang_wheel" 'sglang/kernels/jit/include/*' 'sglang/kernels/jit/csrc/*' -d "$work"
unzip -q "$tvm_wheel" 'tvm_ffi/include/*' -d "$work"
jit=$work/sglang/kernels/jit
"$nvcc" -std=c++20 -O3 -DSGL_CUDA_ARCH=900 --expt-relaxed-constexpr --use_fast_math -arch=sm_90a \
  -I "$jit/include" -I "$jit/csrc" -I "$work/tvm_ffi/include" -c "$root/bench/explore/sglang_peer.cu" -o "$work/sglang_peer.o"
# SGLANG_COMPARE_TWIN_FLAGS: -D overrides of the twin's geometry (KILN_HQ_THREADS, KILN_HQ_MIN_CTAS).
"$nvcc" -std=c++17 -O3 -arch=sm_90a -I "$root/kernels_src/common" ${SGLANG_COMPARE_TWIN_FLAGS:-} "$root/bench/explore/sglang_compare.cu" \
  "$work/sglang_peer.o" -o "$out"
echo "built $out"
