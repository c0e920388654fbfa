#!/usr/bin/env bash
# The geometry and PDL-cost builds of bench/explore/family_geometry.cu:
#   bench/explore/family_geometry.sh build DIR   compile every configuration below into DIR (nvcc, any machine)
#   bench/explore/family_geometry.sh run DIR [M K ...]  run each on the GPU (one table per build; shapes as
#                                        pairs, default family_geometry.cu's set)
# FAMILY_GEOMETRY_ONLY=REGEX picks configurations by name (both modes). FAMILY_GEOMETRY_ARCH (default
# sm_90a) is nvcc's -arch: compute_80 embeds PTX only, which the driver finishes, as kiln's
# KILN_ARCH=compute_80 does.
# A configuration is a name and its -D flags; the family's variant parameters are kiln's
# (KILN_Q_IN 0 bf16 1 fp16 2 fp32, KILN_Q_OUT 0 e4m3 1 int8, KILN_Q_SCALES 0 row 1 col 2 col_tma 3 packed).
set -euo pipefail
mode=${1:?usage: family_geometry.sh build|run DIR}
dir=${2:?usage: family_geometry.sh build|run DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
family() { echo "-DKILN_Q_IN=$1 -DKILN_Q_GROUP=$2 -DKILN_Q_OUT=$3 -DKILN_Q_SCALES=$4 -DKILN_Q_UE8M0=$5 -DKILN_Q_SILU=$6"; }
configs=(
  "shared:-DKILN_BENCH_KERNEL=1"
  "shared_nogd:-DKILN_BENCH_KERNEL=1 -DKILN_NO_GRID_DEPENDENCY"
  "twin:-DKILN_BENCH_KERNEL=2"
  "twin_nogd:-DKILN_BENCH_KERNEL=2 -DKILN_NO_GRID_DEPENDENCY"
  "twin_occ16:-DKILN_BENCH_KERNEL=2 -DKILN_HQ_MIN_CTAS=16"
  "row128_i1:$(family 0 128 0 0 0 0) -DKILN_Q_ITEMS=1"
  "row128_i1_occ8:$(family 0 128 0 0 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "row128_i2:$(family 0 128 0 0 0 0) -DKILN_Q_ITEMS=2"
  "row128_i2_occ8:$(family 0 128 0 0 0 0) -DKILN_Q_ITEMS=2 -DKILN_Q_MIN_CTAS=8"
  "silu128_i1:$(family 0 128 0 0 0 1) -DKILN_Q_ITEMS=1"
  "silu128_i1_occ8:$(family 0 128 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "silu128_i2:$(family 0 128 0 0 0 1) -DKILN_Q_ITEMS=2"
  "col32_i1:$(family 0 32 0 1 0 0) -DKILN_Q_ITEMS=1"
  "col32_i1_occ8:$(family 0 32 0 1 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "col32_i2:$(family 0 32 0 1 0 0) -DKILN_Q_ITEMS=2"
  "col128_i1:$(family 0 128 0 1 0 0) -DKILN_Q_ITEMS=1"
  "col128_i2:$(family 0 128 0 1 0 0) -DKILN_Q_ITEMS=2"
  "int8silu32col_i1:$(family 0 32 1 1 0 1) -DKILN_Q_ITEMS=1"
  "int8silu32col_i1_occ8:$(family 0 32 1 1 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "int8silu32col_i2:$(family 0 32 1 1 0 1) -DKILN_Q_ITEMS=2"
  "int8row128_i1:$(family 0 128 1 0 0 0) -DKILN_Q_ITEMS=1"
  "int8row128_i2:$(family 0 128 1 0 0 0) -DKILN_Q_ITEMS=2"
  "packed32_i1:$(family 0 32 0 3 1 0) -DKILN_Q_ITEMS=1"
  "packed32_i2:$(family 0 32 0 3 1 0) -DKILN_Q_ITEMS=2"
  # Group 32 with SiLU: row-major scales 56% of the ceiling, column-major 76% (2026-12-04 kiln-bench).
  "silu32row_i1:$(family 0 32 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=1"
  "silu32row_i1_occ6:$(family 0 32 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
  "silu32row_i1_occ8:$(family 0 32 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "silu32row_i1_occ8_nogd:$(family 0 32 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8 -DKILN_NO_GRID_DEPENDENCY"
  "silu32row_i2:$(family 0 32 0 0 0 1) -DKILN_Q_ITEMS=2 -DKILN_Q_MIN_CTAS=1"
  "silu32row_i2_occ4:$(family 0 32 0 0 0 1) -DKILN_Q_ITEMS=2 -DKILN_Q_MIN_CTAS=4"
  "silu32col_i1_occ8:$(family 0 32 0 1 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "silu64row_i1_occ8:$(family 0 64 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  # Not measured yet: whether what won at two lanes (two groups, 4 CTAs) wins elsewhere with SiLU.
  "silu32col_i2_occ4:$(family 0 32 0 1 0 1) -DKILN_Q_ITEMS=2 -DKILN_Q_MIN_CTAS=4"
  "silu64row_i2_occ4:$(family 0 64 0 0 0 1) -DKILN_Q_ITEMS=2 -DKILN_Q_MIN_CTAS=4"
  "silu128_i2_occ4:$(family 0 128 0 0 0 1) -DKILN_Q_ITEMS=2 -DKILN_Q_MIN_CTAS=4"
  "silu128_i1_occ4:$(family 0 128 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=4"
  "row32_i2:$(family 0 32 0 0 0 0) -DKILN_Q_ITEMS=2"
  "row32_i2_nogd:$(family 0 32 0 0 0 0) -DKILN_Q_ITEMS=2 -DKILN_NO_GRID_DEPENDENCY"
  # With the L1-allocating loads (2026-12-04), the twin's trade (one group, full occupancy) again.
  "row32_i1_occ8:$(family 0 32 0 0 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "col128_i1_occ8:$(family 0 128 0 1 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "packed32_i1_occ8:$(family 0 32 0 3 1 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "int8row128_i1_occ8:$(family 0 128 1 0 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "fp32row128_i2:$(family 2 128 0 0 0 0) -DKILN_Q_ITEMS=2"
  "fp32row128_i1_occ8:$(family 2 128 0 0 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  # One group per slot against the two the variants below ship with, across M (2026-12-06, H100).
  "silu32row_i1_occ4:$(family 0 32 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=4"
  "int8silu32col_i1_occ6:$(family 0 32 1 1 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
  "int8col32_i1_occ8:$(family 0 32 1 1 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  # Row-major scales with SiLU on the column-major tiles (2026-12-04: column-major SiLU 85-90% at
  # 32768 x 7168 where row-major took 77-87%).
  "silu128_i1_occ8_tiled:$(family 0 128 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8 -DKILN_Q_TILED=1"
  "silu64row_i1_occ8_tiled:$(family 0 64 0 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8 -DKILN_Q_TILED=1"
  "silu32row_i2_occ4_tiled:$(family 0 32 0 0 0 1) -DKILN_Q_ITEMS=2 -DKILN_Q_MIN_CTAS=4 -DKILN_Q_TILED=1"
  "int8silu128row_i1_occ8:$(family 0 128 1 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "int8silu128row_i1_occ8_tiled:$(family 0 128 1 0 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8 -DKILN_Q_TILED=1"
  # SiLU with column-major or packed scales spills 4-16 bytes at 32 registers (8 CTAs); 6 CTAs allow
  # 40 and spill nothing, but took 0-3 points less (packed +1-2 at M = 32768 only; 2026-12-04
  # silu-occupancy.log): the spill costs less than the occupancy.
  "silu128col_i1_occ8:$(family 0 128 0 1 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "silu128col_i1_occ6:$(family 0 128 0 1 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
  "silu128packed_i1_occ8:$(family 0 128 0 3 1 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "silu128packed_i1_occ6:$(family 0 128 0 3 1 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
  "int8silu64col_i1_occ8:$(family 0 64 1 1 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=8"
  "int8silu64col_i1_occ6:$(family 0 64 1 1 0 1) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
  # The shipped geometry (no overrides), for A/B runs of a numerics change against an older tree:
  # the variants whose per-element arithmetic the quantize step dominates.
  "ship_silu128row:$(family 0 128 0 0 0 1)"
  "ship_silu128col:$(family 0 128 0 1 0 1)"
  "ship_silu128packed:$(family 0 128 0 3 1 1)"
  "ship_silu128colue8m0:$(family 0 128 0 1 1 1)"
  "ship_int8silu128row:$(family 0 128 1 0 0 1)"
  "ship_int8silu128col:$(family 0 128 1 1 0 1)"
  "ship_int8silu32row:$(family 0 32 1 0 0 1)"
  "ship_packed32:$(family 0 32 0 3 1 0)"
  "ship_int8row128:$(family 0 128 1 0 0 0)"
  "ship_int8col32:$(family 0 32 1 1 0 0)"
  "ship_col128:$(family 0 128 0 1 0 0)"
  "ship_col32:$(family 0 32 0 1 0 0)"
  "ship_int8silu64col:$(family 0 64 1 1 0 1)"
  "ship_silu32packed:$(family 0 32 0 3 1 1)"
  "ship_fp32col32:$(family 2 32 0 1 0 0)"
  # Without the sm_89 conversion (FAMILY_GEOMETRY_ARCH=compute_80) e4m3 takes more registers: the
  # column-major kernels spill 8 bytes at 32 (8 CTAs), and packed two-group kernels take 64.
  "ship_packed128:$(family 0 128 0 3 1 0)"
  "packed128_i1_occ6:$(family 0 128 0 3 1 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
  "packed32_i1_occ6:$(family 0 32 0 3 1 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
  "col128_i1_occ6:$(family 0 128 0 1 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
  "ship_fp16coltma128:$(family 1 128 0 2 0 0)"
  "fp16coltma128_i1_occ6:$(family 1 128 0 2 0 0) -DKILN_Q_ITEMS=1 -DKILN_Q_MIN_CTAS=6"
)
# FAMILY_GEOMETRY_ONLY: an extended regular expression; only the configurations it matches.
if [ -n "${FAMILY_GEOMETRY_ONLY:-}" ]; then
  chosen=()
  for config in "${configs[@]}"; do
    [[ ${config%%:*} =~ ^(${FAMILY_GEOMETRY_ONLY})$ ]] && chosen+=("$config")
  done
  [ ${#chosen[@]} -gt 0 ] || { echo "family_geometry.sh: FAMILY_GEOMETRY_ONLY=$FAMILY_GEOMETRY_ONLY matches nothing" >&2; exit 2; }
  configs=("${chosen[@]}")
fi
mkdir -p "$dir"
for config in "${configs[@]}"; do
  name=${config%%:*}
  flags=${config#*:}
  case $mode in
    build)
      # shellcheck disable=SC2086 # flags are words
      nvcc -O3 -std=c++17 -arch="${FAMILY_GEOMETRY_ARCH:-sm_90a}" -I "$root/kernels_src/common" -I "$root/src" $flags "$root/bench/explore/family_geometry.cu" \
        -o "$dir/$name" &
      # Why two at a time: the CPU machine has two cores.
      while [ "$(jobs -rp | wc -l)" -ge "${NVCC_JOBS:-2}" ]; do wait -n; done
      ;;
    run) echo "### $name"; "$dir/$name" "${@:3}" ;;
    *) echo "family_geometry.sh: unknown mode $mode (build or run)" >&2; exit 2 ;;
  esac
done
wait
if [ "$mode" = build ]; then
  for config in "${configs[@]}"; do
    [ -x "$dir/${config%%:*}" ] || { echo "family_geometry.sh: ${config%%:*} did not build" >&2; exit 1; }
  done
fi
