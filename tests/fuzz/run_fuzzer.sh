#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: FUZZER SEEDS WORK SECONDS [libFuzzer flags...].
# New inputs go to WORK/corpus, so the committed SEEDS folder is only read; a crash, leak or
# timeout leaves its input in WORK/artifacts/, to be copied into SEEDS as a regression input.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
shift 4
rm -rf "$work/artifacts"
mkdir -p "$work/corpus" "$work/artifacts"
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds" || status=$?
# Why: exit 77 would read as "skipped" to Meson; no fuzz run is ever skipped.
[ "$status" -ne 77 ] || status=1
if [ "$status" -ne 0 ]; then
  echo "run_fuzzer: $(basename "$fuzzer") failed (exit $status); inputs:" >&2
  ls -l "$work/artifacts" >&2
fi
exit "$status"
