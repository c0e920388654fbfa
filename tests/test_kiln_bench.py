#!/usr/bin/env python3
"""kiln-bench's CPU-only part, run as a user would: it exits 0, prints the host rows and target
rows, and writes them as JSON. Without a GPU, the GPU parts exit 77 with a message. The installed
kiln program has no benchmark command.

Usage: test_kiln_bench.py KILN_BENCH_EXECUTABLE KILN_EXECUTABLE
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from checks import check, exit_status

def run(program, *args):
    return subprocess.run([program, *args], capture_output=True, text=True, env=dict(os.environ), timeout=240)


def test_host(bench, tmp):
    out = tmp / 'bench.json'
    done = run(bench, '--only', 'host', '--quick', '--json', str(out))
    check(done.returncode == 0, f'bench --only host exits 0, got {done.returncode} (stderr: {done.stderr})')
    for row in ('pick_with (varied m, k', 'NVRTC first compile in this process', 'both modules at once on 2 threads',
                '== disk cache (CPU only)', '== targets'):
        check(row in done.stdout, f'the output shows "{row}": {done.stdout}')
    report = json.loads(out.read_text())
    check(set(report['tables']) == {'host', 'disk_cache'}, f"host parts only: {sorted(report['tables'])}")
    host = {row['name']: row['value'] for row in report['tables']['host']['rows']}
    check(0 < host.get('pick_with_ns', 0) < 10_000, f'pick_with ns is a time: {host}')
    check(host.get('nvrtc_compile_twin_ms', 0) > 1, f'the twin took NVRTC some time: {host}')
    disk = report['tables']['disk_cache']['rows']
    check([row['entries'] for row in disk] == [10, 10000], f'10 and 10,000 entries: {disk}')
    check(all(row['hit_us'] > 0 for row in disk), f'every hit timed: {disk}')
    check(disk[1]['evicted'] > 0 and disk[1]['evicted'] < 10000, f'the pass evicts about a tenth: {disk[1]}')
    names = [row['target'] for row in report['targets']]
    for target in ('pick_with', 'eviction pass over 10000 entries (~10% evicted)'):
        check(target in names, f'target row "{target}": {names}')
    check(all(row['met'] in (True, False, None) for row in report['targets']), 'met is yes, no or none')
    check(report['environment'].get('nvrtc'), f"the NVRTC version is recorded: {report['environment']}")


def test_without_gpu(bench, kiln):
    info = json.loads(run(kiln, 'info', '--json').stdout)
    if info['driver']['available'] and info['devices']:
        print('a GPU is present: the exit-77 path is not exercised here')
        return
    for part in ('gpu', 'decode', 'jit'):
        done = run(bench, '--only', part, '--quick')
        check(done.returncode == 77, f'bench --only {part} without a GPU exits 77, got {done.returncode}')
        check('no usable GPU' in done.stderr, f'and says why: {done.stderr}')
        check('host parts' not in done.stderr, f'and claims no host part ran: {done.stderr}')
    done = run(bench, '--only', 'nonsense')
    check(done.returncode == 2, f'a bad --only is a usage error (exit 2): {done.returncode} {done.stderr}')


def test_not_in_kiln(kiln):
    listed = run(kiln, '--help')
    check(listed.returncode == 0 and 'bench' not in listed.stdout, f'kiln --help lists no benchmark: {listed.stdout}')
    done = run(kiln, 'bench')
    check(done.returncode == 2 and "unknown command 'bench'" in done.stderr,
          f'kiln bench is an unknown command (exit 2): {done.returncode} {done.stderr}')


def main():
    bench, kiln = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        test_host(bench, pathlib.Path(tmp))
    test_without_gpu(bench, kiln)
    test_not_in_kiln(kiln)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
