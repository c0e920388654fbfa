# Sourced by the device scripts (bench/device_*.sh): steps, their statuses and the report.
#   step NAME       starts a step: "### NAME (HH:MM:SS)" in the log being written.
#   step_exit $?    after each command of the step: prints "exit N"; N != 0 marks the step failed
#                   (and returns N, so `step_exit $? || return` can stop a script's steps).
#   steps_report PATTERN LOG...
#                   for each step in the logs, in order: the lines matching PATTERN (an awk ERE)
#                   if it passed, its whole log section if it failed (a Catch2 failure's file:line
#                   and expansion match no summary pattern); then one line naming the failed steps.
#                   Returns 1 if any step failed, 0 otherwise.
# Why statuses and headers are kept in the shell rather than read back from the logs: a command
# may print "exit N" or "### ..." lines itself (bench/run_device.sh does), and a step whose log
# went missing must still count.

steps_all=()
steps_failed=()
step_header=

step() {
  step_header="### $1 ($(date -u +%H:%M:%S))"
  steps_all+=("$step_header")
  printf '\n%s\n' "$step_header"
}

step_exit() {
  local status=$1
  echo "exit $status"
  if [ "$status" -ne 0 ]; then
    local seen
    for seen in ${steps_failed[@]+"${steps_failed[@]}"}; do [ "$seen" = "$step_header" ] && return "$status"; done
    steps_failed+=("${step_header:-### (before any step)}")
  fi
  return "$status"
}

steps_report() {
  local pattern=$1
  shift
  # Why /dev/null first: awk with no file would read stdin, and a missing log must not stop awk
  # before the sections of the logs that are there.
  local logs=(/dev/null) file
  for file in "$@"; do
    if [ -r "$file" ]; then logs+=("$file"); else echo "steps_report: no log $file"; fi
  done
  set -- "${logs[@]}"
  # Why ENVIRON: awk -v would turn backslashes in the pattern or the names into escapes.
  local all failed
  all=$(printf '%s\n' ${steps_all[@]+"${steps_all[@]}"})
  failed=$(printf '%s\n' ${steps_failed[@]+"${steps_failed[@]}"})
  STEPS_ALL=$all STEPS_FAILED=$failed STEPS_PATTERN=$pattern awk '
    BEGIN {
      n = split(ENVIRON["STEPS_ALL"], list, "\n"); for (i = 1; i <= n; i++) if (list[i] != "") known[list[i]] = 1
      n = split(ENVIRON["STEPS_FAILED"], list, "\n"); for (i = 1; i <= n; i++) if (list[i] != "") bad[list[i]] = 1
    }
    FNR == 1 { current = "" }
    $0 in known { current = $0 }
    current in bad { if (current == $0) print $0 "  FAILED, its log follows the summary"; next }
    $0 ~ ENVIRON["STEPS_PATTERN"] { print }
  ' "$@"
  if [ "${#steps_failed[@]}" -eq 0 ]; then
    echo "all ${#steps_all[@]} steps passed"
    return 0
  fi
  local header
  for header in "${steps_failed[@]}"; do
    printf '\n======== failed: %s\n' "${header#\#\#\# }"
    STEPS_ALL=$all HEADER=$header awk '
      BEGIN { n = split(ENVIRON["STEPS_ALL"], list, "\n"); for (i = 1; i <= n; i++) if (list[i] != "") known[list[i]] = 1 }
      FNR == 1 { inside = 0 }
      $0 in known { inside = ($0 == ENVIRON["HEADER"]); found = found || inside }
      inside { print }
      END { if (!found) print "(no log section: the step wrote to none of the logs reported)" }
    ' "$@"
  done
  local names
  names=$(printf '%s\n' "${steps_failed[@]}" | sed 's/^### //; s/ ([0-9:]*)$//' | paste -sd, - | sed 's/,/, /g')
  echo
  echo "${#steps_failed[@]} of ${#steps_all[@]} steps failed: $names"
  return 1
}
