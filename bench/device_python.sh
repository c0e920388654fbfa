#!/usr/bin/env bash
# On the GPU machine (H200: Python 3.12 in /opt/torch/.venv with torch, pybind11, pytest; no
# meson-python), from the repository root with .carry/bin/kiln and .carry/lib/libkiln.so* (plus
# spdlog, fmt, xxhash) carried: builds what python/meson.build builds, there: libkiln_python (the
# Service registry and the op's plan, shared by both modules) and kiln._kiln against the carried
# library (an extension built for another Python does not import), and kiln._kiln_ops, the op's
# kernels on PyTorch's stable ABI, against that Python's torch headers (TORCH_TARGET_VERSION 2.10);
# lays out the kiln package in a temporary folder, runs pytest over tests/python (GPU tests
# included) and the eager host-overhead measurement.
# Writes $OUT/python-tests.log, $OUT/python-pytest.xml, $OUT/python-overhead.{json,md} and the op's
# speed on the compute_80 path against a copy, $OUT/python-speed-compute_80.{json,md}.
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
# torch's include and library folders (python/meson.build asks the same)
read -r torch_inc torch_lib < <($PY -c 'import os, torch; r = os.path.dirname(torch.__file__)
print(os.path.join(r, "include"), os.path.join(r, "lib"))')
py_inc=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
. "$(dirname "$0")/device_steps.sh"
# Why a function: a build step that fails ends the steps (`|| return`) and the report still runs.
python_steps() {
  step "build libkiln_python and kiln._kiln"
  c++ -O2 -std=c++17 -shared -fPIC -fvisibility=hidden -Iinclude python/ext/quant_call.cpp "$lib" \
    -Wl,-soname,libkiln_python.so -Wl,-rpath,"$PWD/.carry/lib" -o "$pkg/libkiln_python.so" &&
    c++ -O2 -std=c++17 -shared -fPIC $($PY -m pybind11 --includes) -Iinclude python/ext/kiln_module.cpp \
      "$pkg/libkiln_python.so" "$lib" -Wl,-rpath,"$PWD/.carry/lib" -Wl,-rpath,"$pkg" -o "$pkg/kiln/_kiln$suffix"
  step_exit $? || return
  step "build kiln._kiln_ops on the stable ABI of torch in $torch_inc"
  # The flags of python/meson.build: the C shim only (libtorch_cpu, libtorch_cuda), 2.10's ABI.
  c++ -O2 -std=c++17 -shared -fPIC -isystem "$torch_inc" -DUSE_CUDA -DTORCH_TARGET_VERSION=0x020a000000000000 \
    "-I$py_inc" -Iinclude python/ext/kiln_ops.cpp "$pkg/libkiln_python.so" "$lib" \
    -L"$torch_lib" -ltorch_cpu -ltorch_cuda -Wl,-rpath,"$torch_lib" -Wl,-rpath,"$PWD/.carry/lib" \
    -Wl,-rpath,"$pkg" -o "$pkg/kiln/_kiln_ops$suffix"
  step_exit $? || return
  step "lay out the package"
  cp python/kiln/*.py "$pkg/kiln/" && cp -r python/kiln/compat "$pkg/kiln/" && cp .carry/bin/kiln "$pkg/kiln/kiln"
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
  # Why a warm first: 180 variants compiled in parallel take seconds, one by one inside the timing
  # loop a minute.
  step "op speed on the compute_80 path"
  local cache
  cache=$(mktemp -d)
  .carry/bin/kiln list --variants | awk '$1 ~ /^per_token_group_quant-/ {print $1}' > "$cache/all.txt" &&
    KILN_ARCH=compute_80 KILN_CACHE_DIR="$cache" .carry/bin/kiln warm --variants "$cache/all.txt" >/dev/null &&
    PYTHONPATH="$pkg" KILN_ARCH=compute_80 KILN_CACHE_DIR="$cache" "$PY" bench/python_speed.py --out "$OUT/python-speed-compute_80"
  step_exit $?
}
python_steps > "$OUT/python-tests.log" 2>&1
steps_report "^###|exit|passed|failed|FAILED|ERROR|REPLAYED|REFUSED" "$OUT/python-tests.log"
status=$?
cat "$OUT/python-overhead.md" "$OUT/op-dispatch.md" "$OUT/python-speed-compute_80.md" 2>/dev/null
exit $status
