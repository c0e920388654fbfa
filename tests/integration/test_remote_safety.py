"""The fleet tier's safety rules on real redis-server processes (free loopback ports, always
stopped): the Redis password never printed by any command, in any path; a node with another
signing key never deletes or replaces what it cannot prove bad; a key-file setting that is set but
unusable turns the tier off and makes `info` and `warm` exit 1; a key of the wrong Redis type is
skipped, counted and named; `cache pull` says what happened (missing, refused, unreachable); a
server out of memory is reported as such and does not pause the tier; a timeout names the server,
the command and the timeout; a bracketed IPv6 address works."""
import itertools
import json
import os
import pathlib
import secrets
import shutil
import subprocess

import pytest

from redis_support import DelayingProxy, free_port, ipv6_loopback, redis_server
from remote_support import node_env, warm

PASSWORD = 'SuperSecret123'
fresh = itertools.count()


def run(kiln, env, *args, timeout=120):
    return subprocess.run([kiln, *args], env=env, capture_output=True, text=True, timeout=timeout)


def json_of(done):
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(done.stdout) if done.stdout.strip().startswith('{\n') else json.loads(lines[-1])
    except (ValueError, IndexError):
        return {}


def warnings(stderr):
    return [line for line in stderr.splitlines() if '[warning]' in line and 'remote cache' in line]


def seed(kiln, tmp, arch):
    """A cache folder warmed without Redis: the entries the other nodes push or are given."""
    folder = tmp / f'seed-{arch}'
    done = run(kiln, node_env(folder), 'warm', '--arch', arch, '--json')
    assert done.returncode == 0, \
        f'seed {arch}: warmed locally' + '\n' + str(done.stderr[-400:])
    return folder


@pytest.fixture(scope='module')
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp('safety')


@pytest.fixture(scope='module')
def seed90(kiln, tmp):
    return seed(kiln, tmp, 'sm_90a')


@pytest.fixture(scope='module')
def seed80(kiln, tmp):
    return seed(kiln, tmp, 'sm_80')


def node(tmp, seed_folder=None, **kiln_vars):
    """A node's environment: its own cache folder (a copy of `seed_folder` when given)."""
    folder = tmp / f'node{next(fresh)}'
    if seed_folder:
        shutil.copytree(seed_folder, folder)
    return node_env(folder, **kiln_vars)


def entry_names(folder):
    return sorted(p.name for p in pathlib.Path(folder).glob('*.kiln'))


def key_file(tmp, name, mode=0o600, text=None):
    path = tmp / name
    path.write_text(secrets.token_hex(32) + '\n' if text is None else text)
    os.chmod(path, mode)
    return path


URLS = {
    'empty database after the slash': 'redis://:{password}@127.0.0.1:{port}/',
    'database not a number': 'redis://kiln:{password}@127.0.0.1:{port}/x',
    'password without a colon, bad port': 'redis://{password}@127.0.0.1:port',
    'bad percent escape': 'redis://:{password}%zz@127.0.0.1:{port}',
    'unknown scheme': 'rediss://:{password}@127.0.0.1:{port}',
    'unclosed bracket': 'redis://:{password}@[::1:{port}',
    'wrong password': 'redis://:{password}x@127.0.0.1:{port}',
    'nothing listening': 'redis://:{password}@127.0.0.1:{closed}',
    'right password': 'redis://:{password}@127.0.0.1:{port}',
    'right password, database 1': 'redis://default:{password}@127.0.0.1:{port}/1',
}
COMMANDS = [['info'], ['info', '--json'], ['warm', '--arch', 'sm_90a'], ['warm', '--arch', 'sm_90a', '--json'],
            ['cache', 'push'], ['cache', 'push', '--json'], ['cache', 'pull', '--arch', 'sm_90a'],
            ['cache', 'pull', '--arch', 'sm_90a', '--json'], ['cache', 'pull', '--arch', 'sm_80'],
            ['cache', 'stats', '--remote'], ['cache', 'stats', '--remote', '--json'], ['cache', 'stats'],
            ['cache', 'verify'], ['list']]


@pytest.fixture(scope='module')
def password_server():
    with redis_server(password=PASSWORD) as server:
        yield server


def url_of(what, server):
    return URLS[what].format(password=PASSWORD, port=server.port, closed=free_port())


@pytest.mark.parametrize('what', URLS)
def test_password_never_printed(kiln, tmp, seed90, password_server, what):
    url = url_of(what, password_server)
    leaks = []
    for command in COMMANDS:
        env = node(tmp, seed90, KILN_REMOTE_CACHE=url, KILN_LOG_LEVEL='debug')
        done = run(kiln, env, *command)
        if 'Secret123' in done.stdout + done.stderr:
            leaks.append(' '.join(command) + ': ' + next(
                line for line in (done.stdout + done.stderr).splitlines() if 'Secret123' in line))
    assert not leaks, f'password: {what}: no command prints it (stdout, stderr, debug log)\n' + '\n'.join(leaks[:4])


def test_malformed_url_shown_masked(kiln, tmp, seed90, password_server):
    env = node(tmp, seed90, KILN_REMOTE_CACHE=url_of('empty database after the slash', password_server))
    done = run(kiln, env, 'info')
    assert done.returncode == 1 and 'remote cache: off' in done.stdout and ':***@127.0.0.1' in done.stdout, \
        'password: info reports the malformed URL with the password replaced, exit 1\n' \
        f'{done.returncode} {done.stdout[-600:]} {done.stderr[-300:]}'
    info = json_of(run(kiln, env, 'info', '--json'))
    assert ':***@' in info.get('remote_cache', {}).get('reason', '') and \
        any(':***@' in p for p in info.get('problems', [])), \
        f"password: info --json shows the URL with *** in reason and problems\n{info.get('remote_cache')}"


def test_wrong_key_never_deletes(kiln, tmp, seed90, seed80):
    key_a, key_b = key_file(tmp, 'a.key'), key_file(tmp, 'b.key')
    n90, n80 = len(entry_names(seed90)), len(entry_names(seed80))
    with redis_server() as server:
        for folder, key in ((seed90, key_a), (seed80, key_b)):
            done = run(kiln, node(tmp, folder, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key),
                       'cache', 'push', '--json')
            assert done.returncode == 0 and json_of(done).get('pushed') == len(entry_names(folder)), \
                f'wrong key: {folder.name} pushed, signed' + '\n' + str(done.stdout + done.stderr[-300:])
        before = server.entries()
        assert len(before) == n90 + n80, \
            'wrong key: Redis holds both keys\' entries' + '\n' + str(str(list(before)))
        # Nodes alternate keys: A's entries are sm_90a, B's are sm_80.
        for round_ in range(2):
            for name, key, own, n_own, other, n_other in (('A', key_a, 'sm_90a', n90, 'sm_80', n80),
                                                           ('B', key_b, 'sm_80', n80, 'sm_90a', n90)):
                env = node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key)
                done = run(kiln, env, 'cache', 'pull', '--arch', own, '--json')
                report = json_of(done)
                assert done.returncode == 0 and report.get('pulled') == n_own, \
                    f'wrong key: round {round_} node {name} gets its own key\'s {own} entries' + '\n' + str(done.stdout + done.stderr[-400:])
                done = run(kiln, env, 'cache', 'pull', '--arch', other, '--json')
                report = json_of(done)
                counters = report.get('counters', {})
                assert (done.returncode == 1 and report.get('pulled') == 0 and
                      counters.get('signature_mismatch') == n_other and counters.get('corrupt') == 0), \
                    f'wrong key: round {round_} node {name} skips the other key\'s {other} entries, counted' + '\n' + str(done.stdout + done.stderr[-400:])
                assert 'signature' in done.stderr and 'left in Redis' in done.stderr and 'deleted' not in done.stderr, \
                    f'wrong key: round {round_} node {name} says it left them in Redis' + '\n' + str(done.stderr[-600:])
                assert server.entries() == before, \
                    f'wrong key: round {round_} node {name} deleted or changed nothing'
        # warm with the other key: compiles here, the publish loses to the entry already there.
        env = node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key_b)
        code, report, err, _ = warm(kiln, env, 'sm_90a')
        remote = report.get('remote', {})
        assert (code == 0 and report.get('kept') == n90 and remote.get('signature_mismatch') == n90 and
              remote.get('hits') == 0 and remote.get('compiles') == n90), \
            'wrong key: warm compiles here and keeps its modules' + '\n' + str(f'{code} {remote} {err[-400:]}')
        differs = [line for line in warnings(err) if 'differs from the fleet' in line]
        assert len(differs) == 1, \
            'wrong key: a node that sees mostly mismatches warns once that its key differs' + '\n' + str(err[-800:])
        assert server.entries() == before, \
            'wrong key: warm deleted or replaced nothing'
        client = server.client()
        assert client.command('DBSIZE') == n90 + n80, \
            'wrong key: DBSIZE unchanged'
        # A value whose entry is broken on its own (checksum) is deleted by a node of any key.
        broken = sorted(k for k in before if '.sm_90a.' in k)[0]
        value = before[broken]
        middle = 41 + (len(value) - 41) // 2
        client.command('SET', broken, value[:middle] + bytes([value[middle] ^ 0x40]) + value[middle + 1:])
        done = run(kiln, node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key_b),
                   'cache', 'pull', '--arch', 'sm_90a', '--json')
        counters = json_of(done).get('counters', {})
        assert counters.get('corrupt') == 1 and counters.get('signature_mismatch') == n90 - 1, \
            'wrong key: the broken value is corrupt, the intact one a mismatch' + '\n' + str(done.stdout + done.stderr[-400:])
        after = server.entries()
        assert broken not in after and len(after) == n90 + n80 - 1, \
            'wrong key: only the value broken on its own was deleted' + '\n' + str(str(sorted(after)))
        client.close()


KEY_FILES = {
    'set but empty': lambda tmp: '',
    'missing': lambda tmp: tmp / 'no-such.key',
    'empty file': lambda tmp: key_file(tmp, 'empty.key', text=''),
    'short': lambda tmp: key_file(tmp, 'short.key', text='0123456789\n'),
    'group-readable': lambda tmp: key_file(tmp, 'group.key', 0o640),
    'world-readable': lambda tmp: key_file(tmp, 'world.key', 0o604),
    'owned by another user': lambda tmp: foreign_key_file(tmp),
}


def foreign_key_file(tmp):
    if os.geteuid() != 0:
        pytest.skip('a key file owned by another user needs root to create (chown); CI runs as root')
    path = key_file(tmp, 'foreign.key')
    os.chown(path, 65534, 65534)
    return path


@pytest.mark.parametrize('what', KEY_FILES)
def test_key_file_problems(kiln, tmp_path, seed90, what):
    value = KEY_FILES[what](tmp_path)
    with redis_server() as server:
        env = node(tmp_path, seed90, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=value)
        info = run(kiln, env, 'info')
        assert info.returncode == 1 and 'remote cache: off' in info.stdout and \
            'KILN_REMOTE_CACHE_KEY_FILE' in info.stderr, f'key file {what}: info reports the tier off and exits 1\n' \
                                                         f'{info.returncode} {info.stdout[-300:]} {info.stderr[-300:]}'
        code, report, err, _ = warm(kiln, env)
        remote = report.get('remote', {})
        assert code == 1 and report.get('kept') == 2 and remote.get('publishes') == 0, \
            f'key file {what}: warm keeps its modules but exits 1 (the tier was asked for)\n{code} {report} {err[-400:]}'
        assert len(warnings(err)) == 1 and 'KILN_REMOTE_CACHE_KEY_FILE' in warnings(err)[0], \
            f'key file {what}: one warning naming the problem\n{err[-600:]}'
        assert not server.entries(), f'key file {what}: nothing published'


def test_wrong_type(kiln, tmp, seed90):
    names = entry_names(seed90)
    stray = 'kiln:entry:' + names[0]
    with redis_server() as server:
        client = server.client()
        client.command('RPUSH', stray, 'x')
        env = node(tmp, seed90, KILN_REMOTE_CACHE=server.url)
        done = run(kiln, env, 'cache', 'stats', '--remote', '--json')
        report = json_of(done)
        assert done.returncode == 0 and report.get('entries') == 0 and report.get('wrong_type') == [stray], \
            'wrong type: stats --remote skips the stray key and names it' + '\n' + str(done.stdout + done.stderr[-300:])
        done = run(kiln, env, 'cache', 'stats', '--remote')
        assert done.returncode == 0 and stray in done.stdout + done.stderr, \
            'wrong type: the text report names it' + '\n' + str(done.stdout + done.stderr[-300:])
        done = run(kiln, env, 'cache', 'push', '--json')
        report = json_of(done)
        assert (report.get('pushed') == len(names) - 1 and report.get('present') == 0 and
              report.get('wrong_type') == [stray]), \
            'wrong type: push does not count the stray key as present, and names it' + '\n' + str(done.stdout + done.stderr[-300:])
        assert done.returncode == 0, \
            'wrong type: push is not failed by it' + '\n' + str(done.stderr[-300:])
        done = run(kiln, env, 'cache', 'stats', '--remote', '--json')
        report = json_of(done)
        assert done.returncode == 0 and report.get('entries') == len(names) - 1 and report.get('wrong_type') == [stray], \
            'wrong type: stats counts the good entries beside it' + '\n' + str(done.stdout + done.stderr[-300:])
        code, report, err, _ = warm(kiln, node(tmp, KILN_REMOTE_CACHE=server.url))
        remote = report.get('remote', {})
        assert (code == 0 and report.get('kept') == len(names) and remote.get('wrong_type') == 1 and
              remote.get('hits') == len(names) - 1 and remote.get('errors') == 0 and remote.get('skipped') == 0), \
            'wrong type: warm compiles that module here, counts it, and uses the rest' + '\n' + str(f'{code} {remote} {err[-400:]}')
        assert any(stray in line for line in warnings(err)), \
            'wrong type: warm names the key' + '\n' + str(err[-400:])
        done = run(kiln, node(tmp, KILN_REMOTE_CACHE=server.url), 'cache', 'pull', '--arch', 'sm_90a', '--json')
        report = json_of(done)
        assert report.get('pulled') == len(names) - 1 and stray in done.stderr, \
            'wrong type: pull gets the rest and names the stray key' + '\n' + str(done.stdout + done.stderr[-400:])
        assert client.command('TYPE', stray) == 'list', \
            'wrong type: the stray key is left alone'
        client.close()


def test_pull_says_what_happened(kiln, tmp, seed90):
    names = entry_names(seed90)
    with redis_server() as server:
        run(kiln, node(tmp, seed90, KILN_REMOTE_CACHE=server.url), 'cache', 'push')
        garbage = 'kiln:entry:' + names[0]
        client = server.client()
        client.command('SET', garbage, b'not a kiln value')
        done = run(kiln, node(tmp, KILN_REMOTE_CACHE=server.url), 'cache', 'pull', '--arch', 'sm_90a', '--json')
        report = json_of(done)
        assert done.returncode == 1 and report.get('pulled') == len(names) - 1 and report.get('refused') == [garbage], \
            'pull: a corrupt value is reported as refused' + '\n' + str(done.stdout + done.stderr[-400:])
        assert 'compiling' not in done.stderr and 'deleted from Redis' in done.stderr, \
            'pull: says it deleted the value, and claims no compile' + '\n' + str(done.stderr[-400:])
        assert client.command('EXISTS', garbage) == 0, \
            'pull: the corrupt value is gone'
        done = run(kiln, node(tmp, KILN_REMOTE_CACHE=server.url), 'cache', 'pull', '--arch', 'sm_80')
        assert done.returncode == 1 and 'not in the remote cache' in done.stderr, \
            'pull: a missing entry is named as such' + '\n' + str(done.stderr[-400:])
        client.close()
    closed = free_port()
    done = run(kiln, node(tmp, KILN_REMOTE_CACHE=f'redis://127.0.0.1:{closed}'), 'cache', 'pull', '--arch', 'sm_90a')
    assert (done.returncode == 1 and f'127.0.0.1:{closed}' in done.stderr and 'refused' in done.stderr and
          '100 ms' in done.stderr and 'not in the remote cache' not in done.stderr), \
        'pull: an unreachable server is named with its address, the cause and the connect timeout' + '\n' + str(done.stderr[-600:])


def test_out_of_memory(kiln, tmp, seed90):
    names = entry_names(seed90)
    with redis_server() as server:
        client = server.client()
        client.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
        client.command('CONFIG', 'SET', 'maxmemory', '1')
        done = run(kiln, node(tmp, seed90, KILN_REMOTE_CACHE=server.url), 'cache', 'push', '--json')
        report = json_of(done)
        counters = report.get('counters', {})
        assert (done.returncode == 1 and report.get('pushed') == 0 and report.get('out_of_memory') == len(names) and
              counters.get('oom') == len(names) and counters.get('skipped') == 0), \
            'out of memory: every push refused by name and counted, none skipped' + '\n' + str(done.stdout + done.stderr[-400:])
        assert 'out of memory (maxmemory reached)' in done.stderr and 'next try' not in done.stderr, \
            'out of memory: reported as such, and the tier is not paused' + '\n' + str(done.stderr[-600:])
        code, report, err, _ = warm(kiln, node(tmp, KILN_REMOTE_CACHE=server.url))
        remote = report.get('remote', {})
        assert (code == 0 and report.get('kept') == len(names) and remote.get('oom', 0) >= 1 and
              remote.get('skipped') == 0 and 'next try' not in err), \
            'out of memory: warm keeps going, counts OOM, never rests the tier' + '\n' + str(f'{code} {remote} {err[-400:]}')
        client.close()


def test_timeout_names_server(kiln, tmp, seed90):
    with redis_server() as server:
        run(kiln, node(tmp, seed90, KILN_REMOTE_CACHE=server.url), 'cache', 'push')
        proxy = DelayingProxy(server.port, delay=5.0)
        where = f'127.0.0.1:{proxy.address[1]}'
        done = run(kiln, node(tmp, KILN_REMOTE_CACHE=f'redis://{where}', KILN_REMOTE_CACHE_TIMEOUT_MS=150,
                              KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS=2000), 'cache', 'pull', '--arch', 'sm_90a')
        timeouts = [line for line in warnings(done.stderr) if 'timeout' in line]
        assert timeouts and where in timeouts[0] and 'GET' in timeouts[0] and '150 ms' in timeouts[0], \
            'timeout: the warning names host:port, the command and the timeout' + '\n' + str(done.stderr[-600:])
        assert where in done.stderr.split('[warning]')[-1], \
            'timeout: pull\'s summary names the server too' + '\n' + str(done.stderr[-600:])
        proxy.listener.close()


def test_ipv6(kiln, tmp, seed90):
    why_not = ipv6_loopback()
    if why_not:
        pytest.skip(f'IPv6 loopback: {why_not}; the bracketed form is covered by test_remote_config')
    with redis_server(bind='::1') as server:
        url = f'redis://[::1]:{server.port}/0'
        done = run(kiln, node(tmp, seed90, KILN_REMOTE_CACHE=url), 'cache', 'push', '--json')
        report = json_of(done)
        assert (done.returncode == 0 and report.get('pushed') == len(entry_names(seed90)) and
              report.get('remote') == f'redis://[::1]:{server.port}'), \
            'IPv6: push to redis://[::1]:port/0' + '\n' + str(done.stdout + done.stderr[-400:])
        done = run(kiln, node(tmp, KILN_REMOTE_CACHE=url), 'cache', 'pull', '--arch', 'sm_90a', '--json')
        assert done.returncode == 0 and json_of(done).get('pulled') == len(entry_names(seed90)), \
            'IPv6: pull from it' + '\n' + str(done.stdout + done.stderr[-400:])
        done = run(kiln, node(tmp, KILN_REMOTE_CACHE=url), 'info')
        assert f'remote cache: redis://[::1]:{server.port}' in done.stdout, \
            'IPv6: info shows the bracketed address' + '\n' + str(done.stdout[-400:])


def test_counters_listed(kiln, tmp):
    info = json_of(run(kiln, node(tmp), 'info', '--json'))
    remote = info.get('counters', {}).get('remote', {})
    missing = [name for name in ('signature_mismatch', 'wrong_type', 'oom') if name not in remote]
    assert not missing, \
        'counters: info --json lists the new remote counters' + '\n' + str(f'missing {missing} in {remote}')
