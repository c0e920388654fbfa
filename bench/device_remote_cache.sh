#!/usr/bin/env bash
# On the GPU machine, from the repository root: the fleet cache there. Needs carried, besides what
# device_checks.sh needs (.carry/bin/kiln and kiln-bench, libkiln.so*, libspdlog, libfmt, libxxhash in .carry/lib):
#   .carry/lib/libhiredis.so.0.14 (and libcrypto.so.3 if the host lacks it), which libkiln now links;
#   .carry/bin/redis-server and its libraries in .carry/lib (liblzf.so.1, libjemalloc.so.2, libsystemd.so.0,
#   libssl.so.3, libcrypto.so.3, libatomic.so.1, libcap.so.2, libgcrypt.so.20, liblzma.so.5, libzstd.so.1,
#   liblz4.so.1, libgpg-error.so.0).
# Writes $OUT/remote-cache.log: (1) a GPU node with an empty disk and a warm Redis resolves both
# quantizer kernels from Redis (remote hits 2, compiles 0) and quantizes correctly (selftest); (2) the
# CPU-side table of bench/remote_cache.py on this host (per-module times, entry sizes, 16-node burst).
# Prints each passing step's summary lines and each failing step's whole log; exits 1 if any failed.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
export PATH=$PWD/.carry/bin:$PATH
w=$(mktemp -d)
. "$(dirname "$0")/device_steps.sh"
{
step redis; command -v redis-server && redis-server --version; step_exit $?
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$w" --daemonize no --loglevel warning &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null' EXIT
sleep 0.5
export KILN_REMOTE_CACHE=redis://127.0.0.1:$port
step "fill Redis from one node"; KILN_CACHE_DIR=$w/n1 kiln warm --json; step_exit $?
step "empty disk, warm Redis: info resolves both kernels"
KILN_CACHE_DIR=$w/n2 kiln info --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['devices'][0]['fp8_act_quant'], d['counters']['remote'], 'compiles', d['counters']['compiles'])"; step_exit $?
step "empty disk, warm Redis: selftest"; KILN_CACHE_DIR=$w/n3 kiln selftest; step_exit $?
step "kiln-bench: the remote part"; KILN_CACHE_DIR=$w/n4 kiln-bench --only host 2>&1 | sed -n '/^== remote/,/^$/p;/warm Redis: worst/p'; step_exit $?
step "bench/remote_cache.py"; python3 bench/remote_cache.py .carry/bin/kiln --runs 9; step_exit $?
} > "$OUT/remote-cache.log" 2>&1
steps_report "^###|exit|hits|ms/module|compiles per key" "$OUT/remote-cache.log"
