#!/usr/bin/env bash
# kiln-bench of several revisions in one session on one GPU, alternating, for a kernel change's A/B
# (figures from different machines or sessions do not compare: docs/performance.md, "Comparing runs").
#   bench/revisions_ab.sh build DIR REV...
#       here, on any machine with kiln's build dependencies: each revision's kiln, kiln-bench (where
#       the revision has it; older ones carry the benchmark as `kiln bench`) and libkiln, built in a
#       temporary git worktree, into DIR/<short hash>/{bin,lib}; DIR/revisions lists them in the
#       order given. Put DIR under .carry so the device tool carries it.
#   bench/revisions_ab.sh run DIR ROUNDS [KILN-BENCH ARGUMENTS...]
#       on the GPU, from the repository root: ROUNDS rounds of `kiln-bench ARGUMENTS` for every
#       revision in DIR/revisions, in that order, reversed in every second round, each with its own
#       libkiln ahead of .carry/lib (spdlog, fmt, xxhash, hiredis) and a fresh cache folder; logs
#       to $OUT/bench-<hash>-<round>.log (OUT defaults to ./bench-out). Runs them all, then exits
#       1 if any failed. KILN_PDL=1 and the like pass through the environment.
#   Then bench/variants_ab.py compares the builds' variants tables from those logs.
set -euo pipefail
usage="usage: bench/revisions_ab.sh build DIR REV... | run DIR ROUNDS [KILN-BENCH ARGUMENTS...]"
mode=${1:?$usage}
dir=${2:?$usage}
shift 2

build() {
  [ $# -gt 0 ] || { echo "revisions_ab.sh build: name at least one revision" >&2; exit 2; }
  local root nvrtc rev hash work options targets
  root=$(git rev-parse --show-toplevel)
  nvrtc=${KILN_NVRTC_ROOT:-/usr/local/cuda}
  mkdir -p "$dir"
  : >"$dir/revisions"
  for rev in "$@"; do
    hash=$(git -C "$root" rev-parse --short "$rev^{commit}")
    work=$(mktemp -d)
    # Why a trap: a step that fails under set -e must not leave the worktree registered.
    trap 'git -C "$root" worktree remove --force "$work/src" 2>/dev/null; rm -rf "$work"' EXIT
    git -C "$root" worktree add --quiet --detach "$work/src" "$hash"
    # Why only these targets: the A/B needs the library and the programs, not the test suites. A
    # revision whose bench option is a feature builds the benchmark as its own program, kiln-bench.
    options=(-Dnvrtc_root="$nvrtc")
    targets=(tools/kiln)
    if grep -qE "option\('bench', type: 'feature'" "$work/src/meson_options.txt" 2>/dev/null; then
      options+=(-Dbench=enabled)
      targets+=(bench/kiln-bench)
    fi
    if ! { meson setup "$work/build" "$work/src" "${options[@]}" && ninja -C "$work/build" "${targets[@]}"; } \
        >"$work/log" 2>&1; then
      echo "revisions_ab.sh: building $rev ($hash) failed:" >&2
      cat "$work/log" >&2
      exit 1
    fi
    rm -rf "${dir:?}/$hash"
    mkdir -p "$dir/$hash/bin" "$dir/$hash/lib"
    cp "$work/build/tools/kiln" "$dir/$hash/bin/"
    [ ! -f "$work/build/bench/kiln-bench" ] || cp "$work/build/bench/kiln-bench" "$dir/$hash/bin/"
    find "$work/build/src" -maxdepth 1 -name 'libkiln.so*' ! -type d -exec cp -P {} "$dir/$hash/lib/" \;
    # Why strip: the device tool carries at most 64 MiB.
    strip "$dir/$hash/bin/"* "$dir/$hash/lib/"libkiln.so.*.*
    git -C "$root" worktree remove --force "$work/src"
    rm -rf "$work"
    trap - EXIT
    echo "$hash" >>"$dir/revisions"
    echo "built $rev as $dir/$hash"
  done
}

run() {
  local rounds=${1:?$usage}
  shift
  [[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "revisions_ab.sh run: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
  [ -s "$dir/revisions" ] || { echo "revisions_ab.sh run: $dir/revisions is missing or empty (run build first)" >&2; exit 2; }
  local out=${OUT:-$PWD/bench-out} failed=0 round hash status
  local order=()
  mapfile -t order <"$dir/revisions"
  mkdir -p "$out"
  for ((round = 1; round <= rounds; round++)); do
    local this_round=("${order[@]}")
    if ((round % 2 == 0)); then
      this_round=()
      for ((i = ${#order[@]} - 1; i >= 0; i--)); do this_round+=("${order[i]}"); done
    fi
    for hash in "${this_round[@]}"; do
      status=0
      local bench=("$dir/$hash/bin/kiln-bench")
      [ -x "${bench[0]}" ] || bench=("$dir/$hash/bin/kiln" bench)
      LD_LIBRARY_PATH="$dir/$hash/lib:$PWD/.carry/lib:/usr/local/cuda/lib64" KILN_CACHE_DIR=$(mktemp -d) \
        "${bench[@]}" "$@" >"$out/bench-$hash-$round.log" 2>&1 || status=$?
      echo "round $round $hash: exit $status ($(date -u +%H:%M:%S))"
      if [ "$status" -ne 0 ]; then
        failed=1
        tail -20 "$out/bench-$hash-$round.log"
      fi
    done
  done
  return "$failed"
}

case $mode in
  build) build "$@" ;;
  run) run "$@" ;;
  *) echo "revisions_ab.sh: unknown mode '$mode'; $usage" >&2; exit 2 ;;
esac
