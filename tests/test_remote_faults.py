#!/usr/bin/env python3
"""Each way the fleet's Redis can fail a node, on real redis-server processes (free loopback ports,
always stopped): absent at start; killed mid-run; a value corrupted, truncated, replaced with
garbage or with another key's entry; an unsigned or wrongly signed value when a key file is set;
a key file others can read (the tier stays off and `warm` exits 1); a wrong or missing password; a slow server (a delaying proxy) whose
stall the timeouts bound; a lease holder killed with SIGKILL. In every case the node finishes
with verified entries, counts the cause and warns about it once.

Usage: test_remote_faults.py KILN_EXECUTABLE
"""
import os
import pathlib
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from checks import check, exit_status
from redis_support import RedisServer, free_port, redis_server
from remote_support import module_count, node_env, verify, warm

MODULES = 2  # sm_90a: the shared quantizer and the Hopper twin
fresh = iter(range(1000))


def node(tmp, **kiln_vars):
    return node_env(tmp / f'node{next(fresh)}', **kiln_vars)


def remote_of(report):
    return report.get('remote', {})


def warnings(stderr):
    return [line for line in stderr.splitlines() if 'remote cache' in line and '[warning]' in line]


def healthy_node(kiln, env, what):
    """The node did its job: exit 0, every module kept, every entry on its disk verifies."""
    code, report, err, seconds = warm(kiln, env)
    check(code == 0 and report.get('kept') == MODULES, f'{what}: warm exits 0 and keeps {MODULES}',
          f'exit {code} {report} {err[:400]}')
    good, bad = verify(kiln, env)
    check(good == MODULES and not bad, f'{what}: the node\'s entries verify', f'{good} {bad}')
    return report, err, seconds


def test_unix_socket(kiln, tmp):
    with redis_server() as server:
        url = f'unix://{server.socket}'
        report, _, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=url), 'unix socket, first node')
        check(remote_of(report).get('publishes') == MODULES, 'unix socket: entries published', str(remote_of(report)))
        report, _, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=url), 'unix socket, second node')
        check(remote_of(report).get('hits') == MODULES, 'unix socket: the next node hits', str(remote_of(report)))


def test_absent(kiln, tmp):
    env = node(tmp, KILN_REMOTE_CACHE=f'redis://127.0.0.1:{free_port()}')
    report, err, seconds = healthy_node(kiln, env, 'absent')
    remote = remote_of(report)
    check(remote.get('errors', 0) >= 1 and remote.get('compiles') == MODULES, 'absent: counted, compiled here', str(remote))
    check(len(warnings(err)) == 1 and 'unreachable' in err, 'absent: one warning naming the cause', err[:400])


def test_killed_mid_run(kiln, tmp):
    with redis_server() as server:
        env = node(tmp, KILN_REMOTE_CACHE=server.url)
        proc = subprocess.Popen([kiln, 'warm', '--arch', 'all', '--jobs', '1', '--json'], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not server.entries():
            time.sleep(0.01)
        server.kill()
        out, err = proc.communicate(timeout=240)
        import json
        report = json.loads(out.strip().splitlines()[-1])
        remote = remote_of(report)
        check(proc.returncode == 0 and report['kept'] == report['modules'], 'killed mid-run: warm exits 0, keeps all',
              f'{proc.returncode} {err[:400]}')
        check(remote['publishes'] >= 1 and remote['errors'] + remote['timeouts'] >= 1,
              'killed mid-run: published before, counted the loss after', str(remote))
        good, bad = verify(kiln, env)
        check(good == report['modules'] and not bad, 'killed mid-run: every entry verifies')


def test_bad_values(kiln, tmp):
    with redis_server() as server:
        healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url), 'seed')
        good_values = server.entries()
        names = sorted(good_values)
        client = server.client()

        def flip(value):
            middle = len(value) // 2
            return value[:middle] + bytes([value[middle] ^ 0x40]) + value[middle + 1:]

        cases = {
            'corrupted byte': lambda n: flip(good_values[n]),
            'truncated': lambda n: good_values[n][:len(good_values[n]) // 2],
            'garbage': lambda n: b'not a kiln value at all',
            "another key's entry": lambda n: good_values[names[1] if n == names[0] else names[0]],
        }
        for what, bad in cases.items():
            for name in names:
                client.command('SET', name, bad(name))
            report, err, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url), what)
            remote = remote_of(report)
            check(remote.get('corrupt') == MODULES and remote.get('hits') == 0 and remote.get('compiles') == MODULES,
                  f'{what}: both values refused and counted, compiled here', str(remote))
            check(len(warnings(err)) == 1, f'{what}: warned once', err[:400])
            report, _, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url), f'{what}, next node')
            check(remote_of(report).get('hits') == MODULES, f'{what}: the bad values were replaced by good ones',
                  str(remote_of(report)))
        client.close()


def key_file(tmp, name, mode=0o600):
    path = tmp / name
    path.write_text(secrets.token_hex(32) + '\n')
    os.chmod(path, mode)
    return path


def test_signatures(kiln, tmp):
    with redis_server() as server:
        key = key_file(tmp, 'fleet.key')
        healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url), 'unsigned publisher')
        unsigned = server.entries()
        report, err, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key),
                                      'missing signature')
        remote = remote_of(report)
        check(remote.get('signature_mismatch') == MODULES and remote.get('hits') == 0 and remote.get('publishes') == 0,
              'missing signature: unsigned values never loaded by a keyed node, nor replaced', str(remote))
        check(server.entries() == unsigned, 'missing signature: the unsigned values are left in Redis')
        check(len(warnings(err)) == 2 and 'left in Redis' in err and 'differs from the fleet' in err,
              'missing signature: one warning for the value, one that this node\'s key differs', err[:600])
        client = server.client()
        client.command('FLUSHALL')
        client.close()
        healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key), 'signed publisher')
        report, _, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key),
                                    'signed')
        check(remote_of(report).get('hits') == MODULES, 'signed: values published with the key verify on the next node')
        signed = server.entries()
        other = key_file(tmp, 'other.key')
        report, _, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=other),
                                    'wrong signature')
        check(remote_of(report).get('signature_mismatch') == MODULES and remote_of(report).get('hits') == 0,
              'wrong signature: a value signed with another secret is never loaded', str(remote_of(report)))
        check(server.entries() == signed, 'wrong signature: the values are left in Redis')
        # A tampered signed value: the checksum could be fixed by an attacker, the MAC cannot.
        client = server.client()
        for name, value in signed.items():
            client.command('SET', name, value[:9] + bytes(32) + value[41:])
        client.close()
        report, _, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=key),
                                    'zeroed signature')
        check(remote_of(report).get('signature_mismatch') == MODULES and remote_of(report).get('hits') == 0,
              'zeroed signature: refused', str(remote_of(report)))

        loose = key_file(tmp, 'loose.key', 0o644)
        env = node(tmp, KILN_REMOTE_CACHE=server.url, KILN_REMOTE_CACHE_KEY_FILE=loose)
        info = subprocess.run([kiln, 'info'], env=env, capture_output=True, text=True, timeout=60)
        check(info.returncode == 1 and str(loose) in info.stderr and '0644' in info.stderr,
              'key file readable by others: info exits 1 naming the file and its mode', info.stderr[:400])
        code, report, err, _ = warm(kiln, env)
        check(code == 1 and report.get('kept') == MODULES and remote_of(report).get('hits') == 0 and
              remote_of(report).get('publishes') == 0,
              'loose key file: the remote tier stays off (never unsigned by accident), warm keeps its modules and '
              'exits 1', f'{code} {remote_of(report)} {err[:400]}')


def test_passwords(kiln, tmp):
    with redis_server(password='s3cret-pass') as server:
        for what, url in (('wrong password', f'redis://:nope@127.0.0.1:{server.port}'),
                          ('no password', f'redis://127.0.0.1:{server.port}')):
            report, err, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=url), what)
            check(remote_of(report).get('errors', 0) >= 1 and 'authentication refused' in err and len(warnings(err)) == 1,
                  f'{what}: counted, one warning naming authentication', err[:400])
        report, _, _ = healthy_node(kiln, node(tmp, KILN_REMOTE_CACHE=server.url), 'right password')
        check(remote_of(report).get('publishes') == MODULES, 'right password: entries published', str(remote_of(report)))


class DelayingProxy:
    """Forwards to Redis but holds every reply for `delay` seconds: a server that is up but slow."""

    def __init__(self, port, delay):
        self.port, self.delay = port, delay
        self.listener = socket.socket()
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(64)
        self.address = self.listener.getsockname()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(('127.0.0.1', self.port))
            threading.Thread(target=self.pipe, args=(client, upstream, 0), daemon=True).start()
            threading.Thread(target=self.pipe, args=(upstream, client, self.delay), daemon=True).start()

    @staticmethod
    def pipe(source, sink, delay):
        try:
            while data := source.recv(65536):
                time.sleep(delay)
                sink.sendall(data)
        except OSError:
            pass


def test_slow_server(kiln, tmp):
    _, _, _, baseline = warm(kiln, node(tmp))
    with redis_server() as server:
        proxy = DelayingProxy(server.port, delay=5.0)
        env = node(tmp, KILN_REMOTE_CACHE=f'redis://127.0.0.1:{proxy.address[1]}', KILN_REMOTE_CACHE_TIMEOUT_MS=150,
                   KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS=100)
        report, err, seconds = healthy_node(kiln, env, 'slow server')
        remote = remote_of(report)
        print(f'     slow server (replies held 5 s, timeout 150 ms): warm {seconds:.2f} s, without Redis {baseline:.2f} s')
        check(remote.get('timeouts', 0) >= 1 and remote.get('skipped', 0) >= 1,
              'slow server: the timeout fired and the tier rested', str(remote))
        check(seconds < baseline + 1.5, f'slow server: the stall is bounded by the timeouts ({seconds:.2f} s vs '
                                        f'{baseline:.2f} s without Redis)')
        check(len(warnings(err)) == 1 and 'timeout' in err, 'slow server: one warning naming the timeout', err[:400])
        proxy.listener.close()


def test_lease_holder_killed(kiln, tmp):
    with redis_server() as server:
        lease = {'KILN_REMOTE_CACHE': server.url, 'KILN_REMOTE_CACHE_LEASE_MS': 1500}
        holder = subprocess.Popen([kiln, 'warm', '--arch', 'all', '--jobs', '1'], env=node(tmp, **lease),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = server.client()
        deadline = time.monotonic() + 60
        held = []
        while time.monotonic() < deadline and not held and holder.poll() is None:
            held = client.command('KEYS', 'kiln:lease:*')
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        check(bool(held), 'lease holder: a lease was seen before the SIGKILL')
        check(bool(client.command('KEYS', 'kiln:lease:*')), 'lease holder: its lease outlives it (until the TTL)')
        client.close()
        env = node(tmp, **lease)
        code, report, err, seconds = warm(kiln, env, 'all', 1)
        remote = remote_of(report)
        check(code == 0 and report.get('kept') == report.get('modules'), 'lease holder killed: the next node finishes',
              err[:400])
        check(remote.get('lease_waits', 0) >= 1 and remote.get('lease_takeovers', 0) >= 1,
              'lease holder killed: waited, then took the lease over', str(remote))
        check(seconds < 15, f'lease holder killed: bounded by the lease TTL ({seconds:.1f} s)')
        good, bad = verify(kiln, env)
        check(good == report.get('modules') and not bad, 'lease holder killed: entries verify')


def main():
    kiln = sys.argv[1]
    assert module_count(kiln, 'sm_90a') == MODULES
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for test in (test_unix_socket, test_absent, test_killed_mid_run, test_bad_values, test_signatures, test_passwords,
                     test_slow_server, test_lease_holder_killed):
            print(f'-- {test.__name__}')
            test(kiln, tmp)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
