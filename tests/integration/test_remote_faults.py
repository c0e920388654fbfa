"""Each way the fleet's Redis can fail a node, on real redis-server processes (free loopback ports,
always stopped): absent at start; killed mid-run; a value corrupted, truncated, replaced with
garbage or with another key's entry; an unsigned or wrongly signed value when a key file is set;
a key file others can read (the tier stays off and `warm` exits 1); a wrong or missing password; a
slow server (a delaying proxy) whose stall the timeouts bound; a lease holder killed with SIGKILL.
In every case the node finishes with verified entries, counts the cause and warns about it once."""
import itertools
import json
import os
import secrets
import signal
import subprocess

import pytest

from redis_support import DelayingProxy, free_port, redis_server
from remote_support import module_count, node_env, verify, warm

MODULES = 2  # sm_90a: the shared quantizer and the Hopper twin
fresh = itertools.count()


@pytest.fixture(scope='module', autouse=True)
def two_modules(kiln):
    assert module_count(kiln, 'sm_90a') == MODULES


def node(tmp, **kiln_vars):
    return node_env(tmp / f'node{next(fresh)}', **kiln_vars)


def remote_of(report):
    return report.get('remote', {})


def warnings(stderr):
    return [line for line in stderr.splitlines() if 'remote cache' in line and '[warning]' in line]


def healthy_node(kiln, env, what):
    """The node did its job: exit 0, every module kept, every entry on its disk verifies."""
    code, report, err, seconds = warm(kiln, env)
    assert code == 0 and report.get('kept') == MODULES, f'{what}: warm exits 0 and keeps {MODULES}\n' \
                                                        f'exit {code} {report} {err[:400]}'
    good, bad = verify(kiln, env)
    assert good == MODULES and not bad, f"{what}: the node's entries verify ({good} {bad})"
    return report, err, seconds


def test_unix_socket(kiln, tmp_path):
    with redis_server() as server:
        url = f'unix://{server.socket}'
        report, _, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=url), 'unix socket, first node')
        assert remote_of(report).get('publishes') == MODULES, f'unix socket: entries published {remote_of(report)}'
        report, _, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=url), 'unix socket, second node')
        assert remote_of(report).get('hits') == MODULES, f'unix socket: the next node hits {remote_of(report)}'


def test_absent(kiln, tmp_path):
    env = node(tmp_path, KILN_REMOTE_CACHE=f'redis://127.0.0.1:{free_port()}')
    report, err, seconds = healthy_node(kiln, env, 'absent')
    remote = remote_of(report)
    assert remote.get('errors', 0) >= 1 and remote.get('compiles') == MODULES, f'absent: counted, compiled here {remote}'
    assert len(warnings(err)) == 1 and 'unreachable' in err, f'absent: one warning naming the cause\n{err[:400]}'


def test_killed_mid_run(kiln, tmp_path):
    with redis_server() as server:
        env = node(tmp_path, KILN_REMOTE_CACHE=server.url)
        proc = subprocess.Popen([kiln, 'warm', '--arch', 'all', '--jobs', '1', '--json'], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            server.wait_for_key('kiln:entry:*')
        finally:
            server.kill()
        out, err = proc.communicate(timeout=240)
        report = json.loads(out.strip().splitlines()[-1])
        remote = remote_of(report)
        assert proc.returncode == 0 and report['kept'] == report['modules'], \
            f'killed mid-run: warm exits 0, keeps all\n{proc.returncode} {err[:400]}'
        assert remote['publishes'] >= 1 and remote['errors'] + remote['timeouts'] >= 1, \
            f'killed mid-run: published before, counted the loss after {remote}'
        good, bad = verify(kiln, env)
        assert good == report['modules'] and not bad, 'killed mid-run: every entry verifies'


def flip(value):
    middle = len(value) // 2
    return value[:middle] + bytes([value[middle] ^ 0x40]) + value[middle + 1:]


BAD_VALUES = {
    'corrupted byte': lambda good, name, other: flip(good[name]),
    'truncated': lambda good, name, other: good[name][:len(good[name]) // 2],
    'garbage': lambda good, name, other: b'not a kiln value at all',
    "another key's entry": lambda good, name, other: good[other],
}


@pytest.fixture(scope='module')
def seeded(kiln, tmp_path_factory):
    """One server for the bad-value cases, with the entries of a node that warmed against it."""
    with redis_server() as server:
        healthy_node(kiln, node(tmp_path_factory.mktemp('seed'), KILN_REMOTE_CACHE=server.url), 'seed')
        yield server, server.entries()


@pytest.mark.parametrize('what', BAD_VALUES)
def test_bad_values(kiln, tmp_path, seeded, what):
    server, good = seeded
    names = sorted(good)
    client = server.client()
    for name in names:
        client.command('SET', name, BAD_VALUES[what](good, name, names[1] if name == names[0] else names[0]))
    client.close()
    report, err, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url), what)
    remote = remote_of(report)
    assert remote.get('corrupt') == MODULES and remote.get('hits') == 0 and remote.get('compiles') == MODULES, \
        f'{what}: both values refused and counted, compiled here {remote}'
    assert len(warnings(err)) == 1, f'{what}: warned once\n{err[:400]}'
    report, _, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url), f'{what}, next node')
    assert remote_of(report).get('hits') == MODULES, \
        f'{what}: the bad values were replaced by good ones {remote_of(report)}'


def key_file(tmp, name, mode=0o600):
    path = tmp / name
    path.write_text(secrets.token_hex(32) + '\n')
    os.chmod(path, mode)
    return path


def test_signatures(kiln, tmp_path):
    with redis_server() as server:
        key = key_file(tmp_path, 'fleet.key')
        healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url), 'unsigned publisher')
        unsigned = server.entries()
        report, err, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url,
                                                 KILN_REMOTE_CACHE_KEY_FILE=key), 'missing signature')
        remote = remote_of(report)
        assert remote.get('signature_mismatch') == MODULES and remote.get('hits') == 0 and \
            remote.get('publishes') == 0, f'missing signature: unsigned values never loaded by a keyed node, nor ' \
                                          f'replaced {remote}'
        assert server.entries() == unsigned, 'missing signature: the unsigned values are left in Redis'
        assert len(warnings(err)) == 2 and 'left in Redis' in err and 'differs from the fleet' in err, \
            f"missing signature: one warning for the value, one that this node's key differs\n{err[:600]}"
        client = server.client()
        client.command('FLUSHALL')
        client.close()
        healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key),
                     'signed publisher')
        report, _, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key),
                                    'signed')
        assert remote_of(report).get('hits') == MODULES, 'signed: values published with the key verify on the next node'
        signed = server.entries()
        other = key_file(tmp_path, 'other.key')
        report, _, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url,
                                               KILN_REMOTE_CACHE_KEY_FILE=other), 'wrong signature')
        assert remote_of(report).get('signature_mismatch') == MODULES and remote_of(report).get('hits') == 0, \
            f'wrong signature: a value signed with another secret is never loaded {remote_of(report)}'
        assert server.entries() == signed, 'wrong signature: the values are left in Redis'
        # A tampered signed value: the checksum could be fixed by an attacker, the MAC cannot.
        client = server.client()
        for name, value in signed.items():
            client.command('SET', name, value[:9] + bytes(32) + value[41:])
        client.close()
        report, _, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key),
                                    'zeroed signature')
        assert remote_of(report).get('signature_mismatch') == MODULES and remote_of(report).get('hits') == 0, \
            f'zeroed signature: refused {remote_of(report)}'


def test_loose_key_file(kiln, tmp_path):
    with redis_server() as server:
        loose = key_file(tmp_path, 'loose.key', 0o644)
        env = node(tmp_path, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=loose)
        info = subprocess.run([kiln, 'info'], env=env, capture_output=True, text=True, timeout=60)
        assert info.returncode == 1 and str(loose) in info.stderr and '0644' in info.stderr, \
            f'key file readable by others: info exits 1 naming the file and its mode\n{info.stderr[:400]}'
        code, report, err, _ = warm(kiln, env)
        assert code == 1 and report.get('kept') == MODULES and remote_of(report).get('hits') == 0 and \
            remote_of(report).get('publishes') == 0, \
            'loose key file: the remote tier stays off (never unsigned by accident), warm keeps its modules and ' \
            f'exits 1\n{code} {remote_of(report)} {err[:400]}'


@pytest.mark.parametrize('what, url', [('wrong password', 'redis://:nope@127.0.0.1:{port}'),
                                       ('no password', 'redis://127.0.0.1:{port}')])
def test_bad_password(kiln, tmp_path, what, url):
    with redis_server(password='s3cret-pass') as server:
        report, err, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=url.format(port=server.port)), what)
        assert remote_of(report).get('errors', 0) >= 1 and 'authentication refused' in err and len(warnings(err)) == 1, \
            f'{what}: counted, one warning naming authentication\n{err[:400]}'


def test_right_password(kiln, tmp_path):
    with redis_server(password='s3cret-pass') as server:
        report, _, _ = healthy_node(kiln, node(tmp_path, KILN_REMOTE_CACHE=server.url), 'right password')
        assert remote_of(report).get('publishes') == MODULES, f'right password: entries published {remote_of(report)}'


def test_slow_server(kiln, tmp_path):
    _, _, _, baseline = warm(kiln, node(tmp_path))
    with redis_server() as server:
        proxy = DelayingProxy(server.port, delay=5.0)
        env = node(tmp_path, KILN_REMOTE_CACHE=f'redis://127.0.0.1:{proxy.address[1]}', KILN_REMOTE_CACHE_TIMEOUT_MS=150,
                   KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS=100)
        try:
            report, err, seconds = healthy_node(kiln, env, 'slow server')
        finally:
            proxy.listener.close()
        remote = remote_of(report)
        print(f'slow server (replies held 5 s, timeout 150 ms): warm {seconds:.2f} s, without Redis {baseline:.2f} s')
        assert remote.get('timeouts', 0) >= 1 and remote.get('skipped', 0) >= 1, \
            f'slow server: the timeout fired and the tier rested {remote}'
        assert seconds < baseline + 1.5, \
            f'slow server: the stall is bounded by the timeouts ({seconds:.2f} s vs {baseline:.2f} s without Redis)'
        assert len(warnings(err)) == 1 and 'timeout' in err, f'slow server: one warning naming the timeout\n{err[:400]}'


def test_lease_holder_killed(kiln, tmp_path):
    with redis_server() as server:
        lease = {'KILN_REMOTE_CACHE': server.url, 'KILN_REMOTE_CACHE_LEASE_MS': 1500}
        holder = subprocess.Popen([kiln, 'warm', '--arch', 'all', '--jobs', '1'], env=node(tmp_path, **lease),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            held = server.wait_for_key('kiln:lease:*')
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        assert held, 'lease holder: a lease was seen before the SIGKILL'
        client = server.client()
        assert client.command('KEYS', 'kiln:lease:*'), 'lease holder: its lease outlives it (until the TTL)'
        client.close()
        env = node(tmp_path, **lease)
        code, report, err, seconds = warm(kiln, env, 'all', 1)
        remote = remote_of(report)
        assert code == 0 and report.get('kept') == report.get('modules'), \
            f'lease holder killed: the next node finishes\n{err[:400]}'
        assert remote.get('lease_waits', 0) >= 1 and remote.get('lease_takeovers', 0) >= 1, \
            f'lease holder killed: waited, then took the lease over {remote}'
        assert seconds < 15, f'lease holder killed: bounded by the lease TTL ({seconds:.1f} s)'
        good, bad = verify(kiln, env)
        assert good == report.get('modules') and not bad, 'lease holder killed: entries verify'
