"""kiln-bench's CPU-only part, run as a user would: it exits 0, prints the host rows and target
rows, and writes them as JSON. Without a GPU, the GPU parts exit 77 with a message. The installed
kiln program has no benchmark command."""
import json
import os
import subprocess

import pytest


def run(program, *args):
    return subprocess.run([program, *args], capture_output=True, text=True, env=dict(os.environ), timeout=240)


@pytest.fixture(scope='module')
def host_run(kiln_bench, tmp_path_factory):
    out = tmp_path_factory.mktemp('bench') / 'bench.json'
    done = run(kiln_bench, '--only', 'host', '--quick', '--json', str(out))
    assert done.returncode == 0, f'bench --only host exits 0, got {done.returncode} (stderr: {done.stderr})'
    return done, json.loads(out.read_text())


@pytest.mark.parametrize('row', ['pick_with (varied m, k', 'NVRTC first compile in this process',
                                 'both modules at once on 2 threads', '== disk cache (CPU only)', '== targets'])
def test_host_rows_shown(host_run, row):
    done, _ = host_run
    assert row in done.stdout, f'the output shows "{row}": {done.stdout}'


def test_host_report(host_run):
    _, report = host_run
    assert set(report['tables']) == {'host', 'disk_cache'}, f"host parts only: {sorted(report['tables'])}"
    host = {row['name']: row['value'] for row in report['tables']['host']['rows']}
    assert 0 < host.get('pick_with_ns', 0) < 10_000, f'pick_with ns is a time: {host}'
    assert host.get('nvrtc_compile_twin_ms', 0) > 1, f'the twin took NVRTC some time: {host}'
    disk = report['tables']['disk_cache']['rows']
    assert [row['entries'] for row in disk] == [10, 10000], f'10 and 10,000 entries: {disk}'
    assert all(row['hit_us'] > 0 for row in disk), f'every hit timed: {disk}'
    assert disk[1]['evicted'] > 0 and disk[1]['evicted'] < 10000, f'the pass evicts about a tenth: {disk[1]}'
    names = [row['target'] for row in report['targets']]
    for target in ('pick_with', 'eviction pass over 10000 entries (~10% evicted)'):
        assert target in names, f'target row "{target}": {names}'
    assert all(row['met'] in (True, False, None) for row in report['targets']), 'met is yes, no or none'
    assert report['environment'].get('nvrtc'), f"the NVRTC version is recorded: {report['environment']}"


@pytest.mark.parametrize('part', ['gpu', 'decode', 'jit'])
def test_gpu_part_without_gpu(kiln_bench, kiln, part):
    info = json.loads(run(kiln, 'info', '--json').stdout)
    if info['driver']['available'] and info['devices']:
        pytest.skip('a GPU is present: the exit-77 path is not exercised here')
    done = run(kiln_bench, '--only', part, '--quick')
    assert done.returncode == 77, f'bench --only {part} without a GPU exits 77, got {done.returncode}'
    assert 'no usable GPU' in done.stderr, f'and says why: {done.stderr}'
    assert 'host parts' not in done.stderr, f'and claims no host part ran: {done.stderr}'


def test_bad_only_is_a_usage_error(kiln_bench):
    done = run(kiln_bench, '--only', 'nonsense')
    assert done.returncode == 2, f'a bad --only is a usage error (exit 2): {done.returncode} {done.stderr}'


def test_not_in_kiln(kiln):
    listed = run(kiln, '--help')
    assert listed.returncode == 0 and 'bench' not in listed.stdout, f'kiln --help lists no benchmark: {listed.stdout}'
    done = run(kiln, 'bench')
    assert done.returncode == 2 and "unknown command 'bench'" in done.stderr, \
        f'kiln bench is an unknown command (exit 2): {done.returncode} {done.stderr}'
