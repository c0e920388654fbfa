#!/usr/bin/env python3
"""The fleet cache on a real redis-server (started here on a free loopback port, always stopped):
16 `kiln warm` processes, each a "node" with its own empty cache folder, released together against
one Redis compile each key exactly once in total and all end with verified entries; the same with
Redis killed halfway and restarted: no process fails and every node's entries verify. Then
`kiln cache push` (and what it skips or cannot read), `pull`, `stats --remote` (each key counted
once, against a scripted server that repeats keys), and a node with KILN_JIT=off served by Redis.

Usage: test_remote_fleet.py KILN_EXECUTABLE
"""
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from checks import check, exit_status
from redis_support import RedisServer, redis_server
from remote_support import module_count, node_env, verify, warm

NODES = 16
ARCH = 'all'


def burst(kiln, url, tmp, name, during=None):
    """Starts NODES warms that block on a file, releases them at once, runs `during`, collects."""
    go = tmp / f'{name}-go'
    procs = []
    envs = []
    for i in range(NODES):
        # Why long leases here: 16 processes share 2 cores, so one compile may take seconds; a lease
        # that expired under that load would let a second node compile and break "exactly once".
        # The same for the timeouts: a connect that took over 100 ms on the loaded machine would rest
        # the tier and compile here, which is right for a sick server but not what is tested here.
        env = node_env(tmp / f'{name}-node{i}', KILN_REMOTE_CACHE=url, KILN_REMOTE_CACHE_LEASE_MS=120000,
                       KILN_REMOTE_CACHE_WAIT_MS=120000, KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS=3000,
                       KILN_REMOTE_CACHE_TIMEOUT_MS=3000)
        envs.append(env)
        procs.append(subprocess.Popen(
            ['sh', '-c', 'while [ ! -e "$1" ]; do sleep 0.005; done; exec "$2" warm --arch "$3" --jobs 2 --json',
             'sh', str(go), kiln, ARCH], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    time.sleep(0.5)
    go.touch()
    extra = during() if during else None
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        lines = out.strip().splitlines()
        reports.append((p.returncode, json.loads(lines[-1]) if lines else {}, err))
    return reports, envs, extra


def test_burst(kiln, modules, tmp):
    with redis_server() as server:
        reports, envs, _ = burst(kiln, server.url, tmp, 'burst')
        for i, (code, report, err) in enumerate(reports):
            check(code == 0 and report.get('kept') == modules, f'burst node {i}: warm exits 0 and keeps {modules}',
                  f'exit {code}, {report}, {err[:300]}')
        compiles = sum(r['remote']['compiles'] for _, r, _ in reports if r)
        hits = sum(r['remote']['hits'] for _, r, _ in reports if r)
        publishes = sum(r['remote']['publishes'] for _, r, _ in reports if r)
        waits = sum(r['remote']['lease_waits'] for _, r, _ in reports if r)
        failures = sum(r['remote']['timeouts'] + r['remote']['errors'] for _, r, _ in reports if r)
        print(f'     {NODES} nodes x {modules} modules: {compiles} compiles, {hits} remote hits, '
              f'{publishes} publishes, {waits} lease waits, {failures} Redis failures')
        check(failures == 0, f'burst: no Redis failures (got {failures})')
        check(compiles == modules, f'burst: each of the {modules} keys compiled exactly once in the fleet (got {compiles})')
        lost = sum(r['remote']['publish_lost'] for _, r, _ in reports if r)
        check(publishes == modules and lost == 0, f'burst: each key published once, no node lost a publish race '
                                                  f'(got {publishes} publishes, {lost} lost)')
        check(hits == modules * (NODES - 1), f'burst: every other lookup a remote hit (got {hits})')
        check(len(server.entries()) == modules, 'burst: Redis holds one entry per key')
        for i, env in enumerate(envs):
            good, bad = verify(kiln, env)
            check(good == modules and not bad, f'burst node {i}: {modules} verified entries on disk', f'{good} {bad}')


def test_burst_with_restart(kiln, modules, tmp):
    server = RedisServer()
    restarted = None
    try:
        server.start()

        def kill_and_restart():
            nonlocal restarted
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not server.entries():
                time.sleep(0.01)
            server.kill()
            time.sleep(0.5)
            restarted = RedisServer(port=server.port).start()
            return True

        reports, envs, _ = burst(kiln, server.url, tmp, 'restart', kill_and_restart)
        for i, (code, report, err) in enumerate(reports):
            check(code == 0 and report.get('kept') == modules,
                  f'restart node {i}: warm exits 0 and keeps {modules} though Redis died',
                  f'exit {code}, {report}, {err[:300]}')
        failures = sum(r['remote']['errors'] + r['remote']['timeouts'] for _, r, _ in reports if r)
        compiles = sum(r['remote']['compiles'] for _, r, _ in reports if r)
        print(f'     with a restart: {compiles} compiles, {failures} Redis failures counted')
        check(failures > 0, 'restart: the lost server was noticed and counted')
        for i, env in enumerate(envs):
            good, bad = verify(kiln, env)
            check(good == modules and not bad, f'restart node {i}: {modules} verified entries on disk', f'{good} {bad}')
        # After the restart the tier works again: a late node publishes or hits.
        code, report, err, _ = warm(kiln, node_env(tmp / 'restart-late', KILN_REMOTE_CACHE=server.url), ARCH)
        remote = report.get('remote', {})
        check(code == 0 and remote.get('hits', 0) + remote.get('publishes', 0) == modules,
              'restart: a later node uses the restarted server for every key', f'{remote} {err[:300]}')
    finally:
        server.kill()
        if restarted:
            restarted.kill()


def test_push_pull(kiln, tmp):
    modules = module_count(kiln, 'sm_90a')
    with redis_server() as server:
        source = node_env(tmp / 'push-source', KILN_REMOTE_CACHE=server.url)
        code, _, err, _ = warm(kiln, {k: v for k, v in source.items() if k != 'KILN_REMOTE_CACHE'})
        check(code == 0, 'push: a node warms locally', err[:300])
        done = subprocess.run([kiln, 'cache', 'push', '--json'], env=source, capture_output=True, text=True, timeout=60)
        pushed = json.loads(done.stdout) if done.returncode == 0 else {}
        check(pushed.get('pushed') == modules and len(server.entries()) == modules,
              f'push: {modules} local entries reach Redis', f'{done.stdout} {done.stderr}')
        again = subprocess.run([kiln, 'cache', 'push', '--json'], env=source, capture_output=True, text=True, timeout=60)
        check(json.loads(again.stdout).get('present') == modules, 'push: a second push finds them there (SET NX)')
        stats = subprocess.run([kiln, 'cache', 'stats', '--remote', '--json'], env=source, capture_output=True,
                               text=True, timeout=60)
        remote = json.loads(stats.stdout)
        check(remote['entries'] == modules and remote['bytes'] > 0 and 'sm_90a' in remote['per_target'],
              'stats --remote: entries, bytes and targets', stats.stdout)
        print(f'     entry sizes: {remote["bytes"]} bytes for {remote["entries"]} sm_90a entries')
        target = node_env(tmp / 'pull-target', KILN_REMOTE_CACHE=server.url)
        done = subprocess.run([kiln, 'cache', 'pull', '--arch', 'sm_90a', '--json'], env=target, capture_output=True,
                              text=True, timeout=60)
        pulled = json.loads(done.stdout)
        check(done.returncode == 0 and pulled['pulled'] == modules and not pulled['missing'],
              'pull: the node gets every entry its target needs', done.stdout + done.stderr)
        good, bad = verify(kiln, target)
        check(good == modules and not bad, 'pull: the pulled entries verify on disk')
        done = subprocess.run([kiln, 'cache', 'pull', '--arch', 'sm_80', '--json'], env=target, capture_output=True,
                              text=True, timeout=60)
        check(done.returncode == 1 and 'not in the remote cache' in done.stderr,
              'pull: entries Redis lacks make it exit 1, named', done.stderr)
    off = subprocess.run([kiln, 'cache', 'push'], env=node_env(tmp / 'off'), capture_output=True, text=True, timeout=60)
    check(off.returncode == 1 and 'KILN_REMOTE_CACHE is not set' in off.stderr, 'push without a remote: exit 1, says why',
          off.stderr)


def test_push_skipped_and_unreadable(kiln, tmp):
    modules = module_count(kiln, 'sm_90a')
    with redis_server() as server:
        folder = tmp / 'push-skips'
        source = node_env(folder, KILN_REMOTE_CACHE=server.url)
        code, _, err, _ = warm(kiln, {k: v for k, v in source.items() if k != 'KILN_REMOTE_CACHE'})
        check(code == 0, 'push skips: a node warms locally', err[:300])
        small = dict(source, KILN_CACHE_MAX_BYTES='1000')
        done = subprocess.run([kiln, 'cache', 'push', '--json'], env=small, capture_output=True, text=True, timeout=60)
        report = json.loads(done.stdout) if done.stdout.strip() else {}
        check(done.returncode == 0 and report.get('too_large') == modules and report.get('pushed') == 0,
              f'push: {modules} entries above this process\'s bound are counted as skipped, not pushed',
              f'{done.stdout} {done.stderr}')
        done = subprocess.run([kiln, 'cache', 'push'], env=small, capture_output=True, text=True, timeout=60)
        check(f'{modules} larger than KILN_CACHE_MAX_BYTES skipped' in done.stdout, 'push: the summary says so',
              done.stdout)
        # Why a socket: open(2) refuses one to everyone (ENXIO), root included, whom no mode bit stops.
        entry = next(folder.glob('*.kiln')).name
        module, target, key, _ = entry.split('.')
        unreadable = f'{module}.{target}.{"0" * len(key)}.kiln'
        here = os.getcwd()
        with socket.socket(socket.AF_UNIX) as listener:
            os.chdir(folder)  # Why: a socket's path must fit in 108 bytes; the name alone does
            try:
                listener.bind(unreadable)
            finally:
                os.chdir(here)
            done = subprocess.run([kiln, 'cache', 'push', '--json'], env=source, capture_output=True, text=True,
                                  timeout=60)
        report = json.loads(done.stdout) if done.stdout.strip() else {}
        check(done.returncode == 1 and report.get('unreadable') == 1 and report.get('pushed') == modules,
              'push: an entry it cannot open makes it exit 1 after pushing the rest', f'{done.stdout} {done.stderr}')
        check(f'cannot read {unreadable}' in done.stderr, 'push: the unreadable entry is named, with the reason',
              done.stderr)


class ScriptedRedis:
    """A loopback server that answers SCAN with the pages given (so a key can come twice, as Redis
    allows) and STRLEN with the lengths given (0 for a key deleted since the SCAN)."""

    def __init__(self, pages, lengths):
        self.pages, self.lengths = pages, lengths
        self.listener = socket.socket()
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(4)
        self.url = f'redis://127.0.0.1:{self.listener.getsockname()[1]}'
        threading.Thread(target=self.serve, daemon=True).start()

    @staticmethod
    def bulk(text):
        return b'$%d\r\n%s\r\n' % (len(text), text.encode())

    def reply(self, command):
        if command[0].upper() == 'SCAN':
            cursor = int(command[1])
            following = cursor + 1 if cursor + 1 < len(self.pages) else 0
            keys = self.pages[cursor]
            return (b'*2\r\n' + self.bulk(str(following)) + b'*%d\r\n' % len(keys) +
                    b''.join(self.bulk(k) for k in keys))
        if command[0].upper() == 'STRLEN':
            return b':%d\r\n' % self.lengths.get(command[1], 0)
        return b'-ERR not scripted\r\n'

    def serve(self):
        while True:
            try:
                peer, _ = self.listener.accept()
            except OSError:
                return
            stream = peer.makefile('rb')
            try:
                while (header := stream.readline()).startswith(b'*'):
                    command = []
                    for _ in range(int(header[1:])):
                        size = int(stream.readline()[1:])
                        command.append(stream.read(size + 2)[:-2].decode())
                    peer.sendall(self.reply(command))
            except (OSError, ValueError):
                pass
            peer.close()


def test_stats_counts_each_key_once(kiln, tmp):
    one = 'kiln:entry:quant.sm_90a.' + '1' * 32 + '.kiln'
    two = 'kiln:entry:quant.sm_90a.' + '2' * 32 + '.kiln'
    gone = 'kiln:entry:quant.sm_80.' + '3' * 32 + '.kiln'
    lease = 'kiln:lease:quant.sm_90a.' + '4' * 32 + '.kiln'
    server = ScriptedRedis([[one, two, lease], [one, gone, lease]], {one: 100, two: 50})
    done = subprocess.run([kiln, 'cache', 'stats', '--remote', '--json'],
                          env=node_env(tmp / 'stats', KILN_REMOTE_CACHE=server.url), capture_output=True, text=True,
                          timeout=60)
    report = json.loads(done.stdout) if done.returncode == 0 else {}
    check(report.get('entries') == 2 and report.get('bytes') == 150 and report.get('leases') == 1,
          'stats --remote: a key SCAN returns twice counts once, a key gone before STRLEN not at all',
          f'{done.stdout} {done.stderr}')
    check(list(report.get('per_target', {})) == ['sm_90a'], 'stats --remote: no target of a vanished key', done.stdout)
    server.listener.close()


def test_jit_off_fetches(kiln, tmp):
    modules = module_count(kiln, 'sm_90a')
    with redis_server() as server:
        code, _, err, _ = warm(kiln, node_env(tmp / 'jit-off-source', KILN_REMOTE_CACHE=server.url))
        check(code == 0 and len(server.entries()) == modules, 'KILN_JIT=off: a node with a compiler fills Redis',
              err[:300])
        env = node_env(tmp / 'jit-off-node', KILN_REMOTE_CACHE=server.url, KILN_JIT='off')
        code, report, err, _ = warm(kiln, env)
        remote = report.get('remote', {})
        check(code == 0 and report.get('kept') == modules and remote.get('hits') == modules and
              remote.get('compiles') == 0,
              f'KILN_JIT=off: all {modules} modules from Redis, kept on disk, none compiled',
              f'exit {code} {report} {err[:300]}')
        good, bad = verify(kiln, env)
        check(good == modules and not bad, 'KILN_JIT=off: the entries from Redis verify on disk', f'{good} {bad}')
        code, _, err, _ = warm(kiln, env, 'sm_80')
        check(code == 1 and 'KILN_JIT=off' in err and f'Redis at redis://127.0.0.1:{server.port}' in err,
              'KILN_JIT=off: a module Redis lacks fails, and the reason lists Redis among what was searched', err[:600])


def test_pull_variants(kiln, tmp):
    """cache pull --variants: the manifest's variants too, a duplicate line once, a bad manifest refused
    before anything is fetched."""
    manifest = tmp / 'variants.txt'
    manifest.write_text('per_token_group_quant in=fp16 group=64 out=int8\n'
                        'per_token_group_quant-fp16-g64-int8-row\n')
    modules = module_count(kiln, 'sm_90a')
    with redis_server() as server:
        source = node_env(tmp / 'variants-source', KILN_REMOTE_CACHE=server.url)
        warmed = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--variants', str(manifest), '--json'], env=source,
                                capture_output=True, text=True, timeout=240)
        check(warmed.returncode == 0 and len(server.entries()) == modules + 1,
              'pull --variants: a node warms the modules and the one variant into Redis',
              f'{len(server.entries())} entries; {warmed.stderr[-300:]}')
        target = node_env(tmp / 'variants-target', KILN_REMOTE_CACHE=server.url)
        plain = subprocess.run([kiln, 'cache', 'pull', '--arch', 'sm_90a', '--json'], env=target,
                               capture_output=True, text=True, timeout=60)
        check(plain.returncode == 0 and json.loads(plain.stdout)['pulled'] == modules,
              'pull without --variants: the embedded modules only', plain.stdout + plain.stderr)
        done = subprocess.run([kiln, 'cache', 'pull', '--arch', 'sm_90a', '--variants', str(manifest), '--json'],
                              env=target, capture_output=True, text=True, timeout=60)
        pulled = json.loads(done.stdout) if done.stdout else {}
        check(done.returncode == 0 and pulled.get('pulled') == 1 and pulled.get('present') == modules,
              'pull --variants: the variant is pulled once, the modules already there', done.stdout + done.stderr)
        good, bad = verify(kiln, target)
        check(good == modules + 1 and not bad, 'pull --variants: the variant verifies on disk', f'{good} {bad}')
        bad_manifest = tmp / 'bad-variants.txt'
        bad_manifest.write_text('per_token_group_quant in=bf16 in=fp16\n')
        refused = subprocess.run([kiln, 'cache', 'pull', '--variants', str(bad_manifest)], env=target,
                                 capture_output=True, text=True, timeout=60)
        check(refused.returncode == 2 and '--variants' in refused.stderr and 'given twice' in refused.stderr,
              'pull --variants: a bad manifest is a usage error naming the option', refused.stderr)


def main():
    kiln = sys.argv[1]
    modules = module_count(kiln, ARCH)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        test_burst(kiln, modules, tmp)
        test_burst_with_restart(kiln, modules, tmp)
        test_push_pull(kiln, tmp)
        test_push_skipped_and_unreadable(kiln, tmp)
        test_stats_counts_each_key_once(kiln, tmp)
        test_jit_off_fetches(kiln, tmp)
        test_pull_variants(kiln, tmp)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
