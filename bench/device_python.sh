#!/usr/bin/env bash
# On the GPU machine (H200: Python 3.12 in /opt/torch/.venv with torch, pybind11, pytest; no
# meson-python), from the repository root with .carry/bin/kiln and .carry/lib/libkiln.so* (plus
# spdlog, fmt, xxhash) carried: builds the extensions there, kiln._kiln against the carried library
# (an extension built for another Python does not import) and kiln._kiln_torch against that
# Python's torch (as meson does with -Dtorch), lays out the kiln package in a temporary folder,
# runs pytest over tests/python (GPU tests included) and the eager host-overhead measurement.
# Writes $OUT/python-tests.log, $OUT/python-pytest.xml, $OUT/python-overhead.{json,md}.
# KILN_PYTEST_SELECT, if set, is a pytest -k expression: only the tests it selects run (a short
# device session verifying one change; the whole folder takes about 3 minutes).
# Prints each passing step's summary lines and each failing step's whole log; exits 1 if any failed.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
PY=${KILN_DEVICE_PYTHON:-/opt/torch/.venv/bin/python}
pkg=$(mktemp -d)/site
mkdir -p "$pkg/kiln"
lib=.carry/lib/libkiln.so.0
[ -e "$lib" ] || { echo "device_python: no $lib carried" | tee "$OUT/python-tests.log"; exit 1; }
suffix=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# torch's include and library folders and its _GLIBCXX_USE_CXX11_ABI (python/meson.build asks the same)
read -r torch_inc torch_lib torch_abi < <($PY -c 'import os, torch; r = os.path.dirname(torch.__file__)
print(os.path.join(r, "include"), os.path.join(r, "lib"), int(torch._C._GLIBCXX_USE_CXX11_ABI))')
cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
. "$(dirname "$0")/device_steps.sh"
# Why a function: a build step that fails ends the steps (`|| return`) and the report still runs.
python_steps() {
  step "build the extensions"
  c++ -O2 -std=c++17 -shared -fPIC $($PY -m pybind11 --includes) -Iinclude python/ext/kiln_module.cpp \
    "$lib" -Wl,-rpath,"$PWD/.carry/lib" -o "$pkg/kiln/_kiln$suffix"
  step_exit $? || return
  step "build kiln._kiln_torch against torch in $torch_inc"
  [ -e "$cuda_inc/cuda_runtime_api.h" ] || { echo "device_python: no $cuda_inc/cuda_runtime_api.h (set CUDA_HOME)"; false; }
  step_exit $? || return
  # Why C++20: recent PyTorch headers need it. Why no libkiln: it calls _kiln's capsule (quant_entry.hpp).
  c++ -O2 -std=c++20 -shared -fPIC -D_GLIBCXX_USE_CXX11_ABI="$torch_abi" -isystem "$torch_inc" -isystem "$cuda_inc" \
    "-I$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" -Iinclude python/ext/torch_quant.cpp python/ext/torch_quant_core.cpp python/ext/torch_op_kernels.cpp \
    -L"$torch_lib" -lc10 -lc10_cuda -ltorch -ltorch_cpu -ltorch_python -Wl,-rpath,"$torch_lib" \
    -Wl,-rpath,"$PWD/.carry/lib" -o "$pkg/kiln/_kiln_torch$suffix"
  step_exit $? || return
  step "lay out the package"
  cp python/kiln/*.py "$pkg/kiln/" && cp .carry/bin/kiln "$pkg/kiln/kiln"
  step_exit $? || return
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  step_exit $?
  step pytest
  (cd / && PYTHONPATH="$pkg" KILN_CACHE_DIR="$(mktemp -d)" "$PY" -m pytest -v -p no:cacheprovider -s \
    "$OLDPWD/tests/python" --junitxml="$OUT/python-pytest.xml" ${KILN_PYTEST_SELECT:+-k "$KILN_PYTEST_SELECT"})
  step_exit $?
  step overhead
  PYTHONPATH="$pkg" "$PY" bench/python_overhead.py --out "$OUT/python-overhead"
  step_exit $?
  step "op dispatch"
  PYTHONPATH="$pkg" "$PY" bench/op_dispatch.py --out "$OUT/op-dispatch"
  step_exit $?
}
python_steps > "$OUT/python-tests.log" 2>&1
steps_report "^###|exit|passed|failed|FAILED|ERROR|REPLAYED|REFUSED" "$OUT/python-tests.log"
status=$?
cat "$OUT/python-overhead.md" "$OUT/op-dispatch.md" 2>/dev/null
exit $status
