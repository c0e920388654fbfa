"""The fleet cache on a real redis-server (started here on a free loopback port, always stopped):
16 `kiln warm` processes, each a "node" with its own empty cache folder, released together against
one Redis compile each key exactly once in total and all end with verified entries; the same with
Redis killed halfway and restarted: no process fails and every node's entries verify. Then
`kiln cache push` (and what it skips or cannot read), `pull`, `stats --remote` (each key counted
once, against a scripted server that repeats keys), and a node with KILN_JIT=off served by Redis."""
import json
import os
import socket
import subprocess
import threading

import pytest

from redis_support import RedisServer, redis_server
from remote_support import module_count, node_env, verify, warm

NODES = 16
ARCH = 'all'


@pytest.fixture(scope='module')
def modules(kiln):
    return module_count(kiln, ARCH)


def remote_warning(line):
    return '[warning]' in line and 'remote cache' in line


class Node:
    """One `kiln warm` process held at the gate (its stdin) until the parent closes it. Its stderr
    is read as it comes: the first line says it is waiting, later ones are kept, and a remote-cache
    warning sets `warned`."""

    def __init__(self, kiln, env, gate, warned):
        self.env = env
        self.proc = subprocess.Popen(
            ['sh', '-c', 'echo ready >&2; read _; exec "$0" warm --arch "$1" --jobs 2 --json </dev/null', kiln, ARCH],
            env=env, stdin=gate, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready = threading.Event()
        self.stderr = []
        self.reader = threading.Thread(target=self.read_stderr, args=(warned,), daemon=True)
        self.reader.start()

    def read_stderr(self, warned):
        for line in self.proc.stderr:
            if not self.ready.is_set() and line == 'ready\n':
                self.ready.set()
                continue
            self.stderr.append(line)
            if remote_warning(line):
                warned.set()

    def collect(self):
        """(exit status, the JSON report or {}, stderr) once the process has ended."""
        self.proc.wait(timeout=240)
        lines = self.proc.stdout.read().strip().splitlines()
        self.reader.join(timeout=60)
        return self.proc.returncode, json.loads(lines[-1]) if lines else {}, ''.join(self.stderr)


def burst(kiln, url, tmp, name, during=None):
    """Starts NODES warms held at a gate, releases them together once every one waits there, runs
    `during(warned)` while they work (`warned`: set by the first remote-cache warning of any node),
    and collects their (exit status, report, stderr) and environments."""
    gate, release = os.pipe()
    warned = threading.Event()
    nodes = []
    try:
        for i in range(NODES):
            # Why long leases here: 16 processes share 2 cores, so one compile may take seconds; a lease
            # that expired under that load would let a second node compile and break "exactly once".
            # The same for the timeouts: a connect that took over 100 ms on the loaded machine would rest
            # the tier and compile here, which is right for a sick server but not what is tested here.
            env = node_env(tmp / f'{name}-node{i}', KILN_REMOTE_CACHE=url, KILN_REMOTE_CACHE_LEASE_MS=120000,
                           KILN_REMOTE_CACHE_WAIT_MS=120000, KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS=3000,
                           KILN_REMOTE_CACHE_TIMEOUT_MS=3000)
            nodes.append(Node(kiln, env, gate, warned))
    finally:
        os.close(gate)
    try:
        for i, node in enumerate(nodes):
            assert node.ready.wait(60), f'{name} node {i} reaches the gate'
    finally:
        os.close(release)  # every node's `read` ends at once
    extra = during(warned) if during else None
    return [node.collect() for node in nodes], [node.env for node in nodes], extra


def test_burst(kiln, modules, tmp_path):
    with redis_server() as server:
        reports, envs, _ = burst(kiln, server.url, tmp_path, 'burst')
        for i, (code, report, err) in enumerate(reports):
            assert code == 0 and report.get('kept') == modules, f'burst node {i}: warm exits 0 and keeps {modules}\n' \
                                                                f'exit {code}, {report}, {err[:300]}'
        compiles = sum(r['remote']['compiles'] for _, r, _ in reports)
        hits = sum(r['remote']['hits'] for _, r, _ in reports)
        publishes = sum(r['remote']['publishes'] for _, r, _ in reports)
        waits = sum(r['remote']['lease_waits'] for _, r, _ in reports)
        failures = sum(r['remote']['timeouts'] + r['remote']['errors'] for _, r, _ in reports)
        print(f'{NODES} nodes x {modules} modules: {compiles} compiles, {hits} remote hits, '
              f'{publishes} publishes, {waits} lease waits, {failures} Redis failures')
        assert failures == 0, f'burst: no Redis failures (got {failures})'
        assert compiles == modules, f'burst: each of the {modules} keys compiled exactly once in the fleet (got {compiles})'
        lost = sum(r['remote']['publish_lost'] for _, r, _ in reports)
        assert publishes == modules and lost == 0, \
            f'burst: each key published once, no node lost a publish race (got {publishes} publishes, {lost} lost)'
        assert hits == modules * (NODES - 1), f'burst: every other lookup a remote hit (got {hits})'
        assert len(server.entries()) == modules, 'burst: Redis holds one entry per key'
        for i, env in enumerate(envs):
            good, bad = verify(kiln, env)
            assert good == modules and not bad, f'burst node {i}: {modules} verified entries on disk ({good} {bad})'


def test_burst_with_restart(kiln, modules, tmp_path):
    server = RedisServer()
    restarted = None
    try:
        server.start()

        def kill_and_restart(warned):
            nonlocal restarted
            server.wait_for_key('kiln:entry:*')
            server.kill()
            # Why wait for a warning: the outage must have been met by a node before the server
            # comes back, and a node's first failed call prints one.
            warned.wait(60)
            restarted = RedisServer(port=server.port).start()

        reports, envs, _ = burst(kiln, server.url, tmp_path, 'restart', kill_and_restart)
        for i, (code, report, err) in enumerate(reports):
            assert code == 0 and report.get('kept') == modules, \
                f'restart node {i}: warm exits 0 and keeps {modules} though Redis died\nexit {code}, {report}, {err[:300]}'
        failures = sum(r['remote']['errors'] + r['remote']['timeouts'] for _, r, _ in reports)
        compiles = sum(r['remote']['compiles'] for _, r, _ in reports)
        print(f'with a restart: {compiles} compiles, {failures} Redis failures counted')
        assert failures > 0, 'restart: the lost server was noticed and counted'
        for i, env in enumerate(envs):
            good, bad = verify(kiln, env)
            assert good == modules and not bad, f'restart node {i}: {modules} verified entries on disk ({good} {bad})'
        # After the restart the tier works again: a late node publishes or hits.
        code, report, err, _ = warm(kiln, node_env(tmp_path / 'restart-late', KILN_REMOTE_CACHE=server.url), ARCH)
        remote = report.get('remote', {})
        assert code == 0 and remote.get('hits', 0) + remote.get('publishes', 0) == modules, \
            f'restart: a later node uses the restarted server for every key\n{remote} {err[:300]}'
    finally:
        server.kill()
        if restarted:
            restarted.kill()


def test_push_pull(kiln, tmp_path):
    modules = module_count(kiln, 'sm_90a')
    with redis_server() as server:
        source = node_env(tmp_path / 'push-source', KILN_REMOTE_CACHE=server.url)
        code, _, err, _ = warm(kiln, {k: v for k, v in source.items() if k != 'KILN_REMOTE_CACHE'})
        assert code == 0, f'push: a node warms locally\n{err[:300]}'
        done = subprocess.run([kiln, 'cache', 'push', '--json'], env=source, capture_output=True, text=True, timeout=60)
        pushed = json.loads(done.stdout) if done.returncode == 0 else {}
        assert pushed.get('pushed') == modules and len(server.entries()) == modules, \
            f'push: {modules} local entries reach Redis\n{done.stdout} {done.stderr}'
        again = subprocess.run([kiln, 'cache', 'push', '--json'], env=source, capture_output=True, text=True, timeout=60)
        assert json.loads(again.stdout).get('present') == modules, 'push: a second push finds them there (SET NX)'
        stats = subprocess.run([kiln, 'cache', 'stats', '--remote', '--json'], env=source, capture_output=True,
                               text=True, timeout=60)
        remote = json.loads(stats.stdout)
        assert remote['entries'] == modules and remote['bytes'] > 0 and 'sm_90a' in remote['per_target'], \
            f'stats --remote: entries, bytes and targets\n{stats.stdout}'
        print(f'entry sizes: {remote["bytes"]} bytes for {remote["entries"]} sm_90a entries')
        target = node_env(tmp_path / 'pull-target', KILN_REMOTE_CACHE=server.url)
        done = subprocess.run([kiln, 'cache', 'pull', '--arch', 'sm_90a', '--json'], env=target, capture_output=True,
                              text=True, timeout=60)
        pulled = json.loads(done.stdout)
        assert done.returncode == 0 and pulled['pulled'] == modules and not pulled['missing'], \
            f'pull: the node gets every entry its target needs\n{done.stdout + done.stderr}'
        good, bad = verify(kiln, target)
        assert good == modules and not bad, 'pull: the pulled entries verify on disk'
        done = subprocess.run([kiln, 'cache', 'pull', '--arch', 'sm_80', '--json'], env=target, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 1 and 'not in the remote cache' in done.stderr, \
            f'pull: entries Redis lacks make it exit 1, named\n{done.stderr}'


def test_push_without_a_remote(kiln, tmp_path):
    off = subprocess.run([kiln, 'cache', 'push'], env=node_env(tmp_path / 'off'), capture_output=True, text=True,
                         timeout=60)
    assert off.returncode == 1 and 'KILN_REMOTE_CACHE is not set' in off.stderr, \
        f'push without a remote: exit 1, says why\n{off.stderr}'


def test_push_skipped_and_unreadable(kiln, tmp_path):
    modules = module_count(kiln, 'sm_90a')
    with redis_server() as server:
        folder = tmp_path / 'push-skips'
        source = node_env(folder, KILN_REMOTE_CACHE=server.url)
        code, _, err, _ = warm(kiln, {k: v for k, v in source.items() if k != 'KILN_REMOTE_CACHE'})
        assert code == 0, f'push skips: a node warms locally\n{err[:300]}'
        small = dict(source, KILN_CACHE_MAX_BYTES='1000')
        done = subprocess.run([kiln, 'cache', 'push', '--json'], env=small, capture_output=True, text=True, timeout=60)
        report = json.loads(done.stdout) if done.stdout.strip() else {}
        assert done.returncode == 0 and report.get('too_large') == modules and report.get('pushed') == 0, \
            f"push: {modules} entries above this process's bound are counted as skipped, not pushed\n" \
            f'{done.stdout} {done.stderr}'
        done = subprocess.run([kiln, 'cache', 'push'], env=small, capture_output=True, text=True, timeout=60)
        assert f'{modules} larger than KILN_CACHE_MAX_BYTES skipped' in done.stdout, \
            f'push: the summary says so\n{done.stdout}'
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
        assert done.returncode == 1 and report.get('unreadable') == 1 and report.get('pushed') == modules, \
            f'push: an entry it cannot open makes it exit 1 after pushing the rest\n{done.stdout} {done.stderr}'
        assert f'cannot read {unreadable}' in done.stderr, \
            f'push: the unreadable entry is named, with the reason\n{done.stderr}'


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


def test_stats_counts_each_key_once(kiln, tmp_path):
    one = 'kiln:entry:quant.sm_90a.' + '1' * 32 + '.kiln'
    two = 'kiln:entry:quant.sm_90a.' + '2' * 32 + '.kiln'
    gone = 'kiln:entry:quant.sm_80.' + '3' * 32 + '.kiln'
    lease = 'kiln:lease:quant.sm_90a.' + '4' * 32 + '.kiln'
    server = ScriptedRedis([[one, two, lease], [one, gone, lease]], {one: 100, two: 50})
    try:
        done = subprocess.run([kiln, 'cache', 'stats', '--remote', '--json'],
                              env=node_env(tmp_path / 'stats', KILN_REMOTE_CACHE=server.url), capture_output=True,
                              text=True, timeout=60)
    finally:
        server.listener.close()
    report = json.loads(done.stdout) if done.returncode == 0 else {}
    assert report.get('entries') == 2 and report.get('bytes') == 150 and report.get('leases') == 1, \
        'stats --remote: a key SCAN returns twice counts once, a key gone before STRLEN not at all\n' \
        f'{done.stdout} {done.stderr}'
    assert list(report.get('per_target', {})) == ['sm_90a'], f'stats --remote: no target of a vanished key\n{done.stdout}'


def test_jit_off_fetches(kiln, tmp_path):
    modules = module_count(kiln, 'sm_90a')
    with redis_server() as server:
        code, _, err, _ = warm(kiln, node_env(tmp_path / 'jit-off-source', KILN_REMOTE_CACHE=server.url))
        assert code == 0 and len(server.entries()) == modules, \
            f'KILN_JIT=off: a node with a compiler fills Redis\n{err[:300]}'
        env = node_env(tmp_path / 'jit-off-node', KILN_REMOTE_CACHE=server.url, KILN_JIT='off')
        code, report, err, _ = warm(kiln, env)
        remote = report.get('remote', {})
        assert code == 0 and report.get('kept') == modules and remote.get('hits') == modules and \
            remote.get('compiles') == 0, \
            f'KILN_JIT=off: all {modules} modules from Redis, kept on disk, none compiled\nexit {code} {report} {err[:300]}'
        good, bad = verify(kiln, env)
        assert good == modules and not bad, f'KILN_JIT=off: the entries from Redis verify on disk ({good} {bad})'
        code, _, err, _ = warm(kiln, env, 'sm_80')
        assert code == 1 and 'KILN_JIT=off' in err and f'Redis at redis://127.0.0.1:{server.port}' in err, \
            f'KILN_JIT=off: a module Redis lacks fails, and the reason lists Redis among what was searched\n{err[:600]}'


def test_pull_variants(kiln, tmp_path):
    """cache pull --variants: the manifest's variants too, a duplicate line once, a bad manifest refused
    before anything is fetched."""
    manifest = tmp_path / 'variants.txt'
    manifest.write_text('per_token_group_quant in=fp16 group=64 out=int8\n'
                        'per_token_group_quant-fp16-g64-int8-row\n')
    modules = module_count(kiln, 'sm_90a')
    with redis_server() as server:
        source = node_env(tmp_path / 'variants-source', KILN_REMOTE_CACHE=server.url)
        warmed = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--variants', str(manifest), '--json'], env=source,
                                capture_output=True, text=True, timeout=240)
        assert warmed.returncode == 0 and len(server.entries()) == modules + 1, \
            'pull --variants: a node warms the modules and the one variant into Redis\n' \
            f'{len(server.entries())} entries; {warmed.stderr[-300:]}'
        target = node_env(tmp_path / 'variants-target', KILN_REMOTE_CACHE=server.url)
        plain = subprocess.run([kiln, 'cache', 'pull', '--arch', 'sm_90a', '--json'], env=target,
                               capture_output=True, text=True, timeout=60)
        assert plain.returncode == 0 and json.loads(plain.stdout)['pulled'] == modules, \
            f'pull without --variants: the embedded modules only\n{plain.stdout + plain.stderr}'
        done = subprocess.run([kiln, 'cache', 'pull', '--arch', 'sm_90a', '--variants', str(manifest), '--json'],
                              env=target, capture_output=True, text=True, timeout=60)
        pulled = json.loads(done.stdout) if done.stdout else {}
        assert done.returncode == 0 and pulled.get('pulled') == 1 and pulled.get('present') == modules, \
            f'pull --variants: the variant is pulled once, the modules already there\n{done.stdout + done.stderr}'
        good, bad = verify(kiln, target)
        assert good == modules + 1 and not bad, f'pull --variants: the variant verifies on disk ({good} {bad})'
        bad_manifest = tmp_path / 'bad-variants.txt'
        bad_manifest.write_text('per_token_group_quant in=bf16 in=fp16\n')
        refused = subprocess.run([kiln, 'cache', 'pull', '--variants', str(bad_manifest)], env=target,
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2 and '--variants' in refused.stderr and 'given twice' in refused.stderr, \
            f'pull --variants: a bad manifest is a usage error naming the option\n{refused.stderr}'
