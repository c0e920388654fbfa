#!/usr/bin/env bash
# Deploy without a compiler, on a GPU. From the repository root on the GPU machine, with
# .carry/bin/kiln, .carry/bin/kiln-bench and .carry/lib (libkiln.so*, libspdlog, libfmt, libxxhash) carried:
#  1. packs a bundle with NVRTC present (the toolkit's, or KILN_NVRTC_LIBRARY), lists and verifies it;
#  2. moves it to another folder tree; from another working directory, with NVRTC hidden
#     (KILN_NVRTC_LIBRARY pointing nowhere, no toolkit on LD_LIBRARY_PATH) and KILN_JIT=off,
#     `kiln selftest` must quantize correctly from the bundle, and LD_DEBUG shows libnvrtc never opened;
#  3. times 15 fresh processes each (alternating): start to both quantizer handles from the bundle
#     vs a process doing only driver start-up (cuInit + primary context), via `kiln-bench child`.
# Writes $OUT/deploy.log and $OUT/deploy.md (the timing table); prints the summary,
# with each failing step's whole log, and exits 1 if any step failed.
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.carry/lib
K=$root/.carry/bin/kiln
KB=$root/.carry/bin/kiln-bench
w=$(mktemp -d)
log=$OUT/deploy.log
. "$(dirname "$0")/device_steps.sh"
{
step env; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; step_exit $?
step pack
KILN_CACHE_DIR=$w/build-cache $K pack --arch sm_90a,sm_100a -o $w/kernels.kpack --jobs 4; step_exit $?
$K pack --list $w/kernels.kpack; step_exit $?
$K pack --verify $w/kernels.kpack; step_exit $?
mkdir -p $w/image/opt/model $w/elsewhere && mv $w/kernels.kpack $w/image/opt/model/kernels.kpack; step_exit $?
hidden=(env -u KILN_CACHE_DIR KILN_NVRTC_LIBRARY=$w/no/libnvrtc.so.13 KILN_JIT=off
        KILN_CACHE_PATH=$w/image/opt/model/kernels.kpack HOME=$w/elsewhere)
step "info, NVRTC hidden, KILN_JIT=off"
(cd $w/elsewhere && "${hidden[@]}" $K info); step_exit $?
step "selftest, NVRTC hidden, KILN_JIT=off, from the moved bundle"
(cd $w/elsewhere && "${hidden[@]}" LD_DEBUG=files LD_DEBUG_OUTPUT=$w/ld $K selftest); step_exit $?
opened=$(cat $w/ld.* 2>/dev/null | grep -c 'file=.*libnvrtc')
echo "libnvrtc opened by the selftest process: $opened times"
# Why a status of its own: the step is there to prove NVRTC is never opened, which takes LD_DEBUG's
# files to exist and name no libnvrtc.
compgen -G "$w/ld.*" > /dev/null && [ "$opened" -eq 0 ]; step_exit $?
step timing
(cd $w/elsewhere && "${hidden[@]}" python3 - "$KB" "$OUT/deploy.md" <<'PY'
import json, statistics, subprocess, sys, time
kiln_bench, out = sys.argv[1], sys.argv[2]
runs = {'driver': [], 'bundle': []}
rows = {'driver': [], 'bundle': []}
for i in range(15):
    for name, mode in (('driver', 'driver'), ('bundle', 'jit')):
        start = time.monotonic_ns()
        done = subprocess.run([kiln_bench, 'child', '--mode', mode, '--spawned-at', str(start)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            sys.exit(f'{name} child failed: {done.stderr[-800:]}')
        line = json.loads(done.stdout.strip().splitlines()[-1])
        rows[name].append(line)
        runs[name].append(line['spawn_to_ready_ms' if name == 'driver' else 'spawn_to_handles_ms'])
b = rows['bundle']
assert all(r['shared'] and r['twin'] and r['compiles'] == 0 for r in b), b
d, k = statistics.median(runs['driver']), statistics.median(runs['bundle'])
table = ['| process (fresh, NVRTC hidden, KILN_JIT=off, bundle via KILN_CACHE_PATH) | median ms | min | max |',
         '| --- | --- | --- | --- |',
         f'| driver only: start to primary context | {d:.1f} | {min(runs["driver"]):.1f} | {max(runs["driver"]):.1f} |',
         f'| kiln: start to both quantizer handles from the bundle | {k:.1f} | {min(runs["bundle"]):.1f} | {max(runs["bundle"]):.1f} |',
         f'| ratio | {k / d:.3f}x | | |',
         '', f'15 runs each, alternating; compiles 0 in every kiln run; both handles loaded.']
open(out, 'w').write('\n'.join(table) + '\n')
print('\n'.join(table))
PY
); step_exit $?
} > $log 2>&1
steps_report "^###|exit|libnvrtc opened|OK|quantiz|ratio|median" $log
status=$?
cp $OUT/deploy.md /dev/stdout 2>/dev/null
exit $status
