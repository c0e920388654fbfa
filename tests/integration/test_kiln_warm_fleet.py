"""`kiln warm --json` counters on a fleet: 8 nodes with empty disks against one real redis-server
(started here on a free loopback port, always stopped). The top-level `compiles` counts NVRTC
compiles in each process tree only, so summed over the fleet it is exactly one per key; a module
fetched from Redis is a remote hit, never a compile. A second round, every module now in Redis,
compiles nothing anywhere."""
import json
import subprocess

import pytest

from redis_support import redis_server
from remote_support import module_count, node_env

NODES = 8
ARCH = 'sm_90a'


def fleet(kiln, url, tmp, name):
    """Starts NODES warms at once, each a node with its own empty folder; returns their reports."""
    procs = []
    for i in range(NODES):
        # Why long leases and timeouts: 8 processes share the machine's cores, and a lease that
        # expired under that load would let a second node compile, which is not what is tested.
        env = node_env(tmp / f'{name}-node{i}', KILN_REMOTE_CACHE=url, KILN_REMOTE_CACHE_LEASE_MS=120000,
                       KILN_REMOTE_CACHE_WAIT_MS=120000, KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS=3000,
                       KILN_REMOTE_CACHE_TIMEOUT_MS=3000)
        procs.append(subprocess.Popen([kiln, 'warm', '--arch', ARCH, '--jobs', '2', '--json'], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    reports = []
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=240)
        lines = out.strip().splitlines()
        assert p.returncode == 0, f'{name} node {i}: warm exits 0\n{p.returncode} {err[-300:]}'
        reports.append(json.loads(lines[-1]) if lines else {})
    return reports


@pytest.fixture(scope='module')
def modules(kiln):
    return module_count(kiln, ARCH)


@pytest.fixture(scope='module')
def server():
    with redis_server() as server:
        yield server


@pytest.fixture(scope='module')
def cold(kiln, server, tmp_path_factory):
    """The first round: every node's disk and Redis empty."""
    return fleet(kiln, server.url, tmp_path_factory.mktemp('fleet'), 'cold')


def test_cold_fleet_compiles_each_key_once(cold, modules):
    compiles = [r.get('compiles') for r in cold]
    remote_compiles = [r.get('remote', {}).get('compiles') for r in cold]
    hits = [r.get('remote', {}).get('hits') for r in cold]
    print(f'{NODES} nodes x {modules} modules: compiles {compiles}, remote compiles {remote_compiles}, '
          f'remote hits {hits}')
    assert sum(c or 0 for c in compiles) == modules, \
        f'the top-level compiles sum to one per key over the fleet ({compiles})'
    assert all(r.get('compiles') == r.get('remote', {}).get('compiles') for r in cold), \
        f"each node: the top-level compiles equal the remote tier's (compiles behind it)\n{compiles} {remote_compiles}"
    assert all(r.get('compiles', 0) + r.get('remote', {}).get('hits', 0) == modules for r in cold), \
        f'each node: every module either compiled there or a remote hit\n{compiles} {hits}'
    assert all(r.get('kept') == modules for r in cold), 'every node keeps every module on disk'


def test_served_fleet_compiles_nothing(kiln, server, cold, modules, tmp_path):
    again = fleet(kiln, server.url, tmp_path, 'served')
    assert all(r.get('compiles') == 0 and r.get('remote', {}).get('hits') == modules for r in again), \
        f'all from Redis: compiles 0 and {modules} remote hits on every node\n' + \
        str([(r.get('compiles'), r.get('remote')) for r in again])[:600]
    assert all(r.get('compile_ms') == 0 for r in again), \
        f"all from Redis: compile_ms 0 on every node\n{[r.get('compile_ms') for r in again]}"
