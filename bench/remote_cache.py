#!/usr/bin/env python3
"""The fleet cache, measured on the CPU machine (no GPU needed: `kiln warm` compiles and caches).
Starts its own redis-server on a free loopback port and prints a markdown table:
- time per module for a node with an empty disk: compiling (no Redis), from a warm Redis over
  loopback, and from its own disk afterwards (`kiln warm` wall time / modules, median of RUNS);
- entry sizes per target (what Redis must hold);
- compiles per key for a 16-node burst released together against one Redis.

Usage: bench/remote_cache.py KILN_EXECUTABLE [--runs N] [--out FILE]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / 'tests'))
from redis_support import redis_server  # noqa: E402
from remote_support import node_env, warm  # noqa: E402


def per_module_ms(kiln, env, arch):
    code, report, err, _ = warm(kiln, env, arch, 1)
    if code != 0:
        sys.exit(f'kiln warm failed: {err}')
    return report['wall_ms'] / report['modules'], report


def timed(work):
    start = time.perf_counter()
    work()
    return (time.perf_counter() - start) * 1000


def publish_file(folder, data):
    path = folder / 'probe.tmp'
    with open(path, 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(path, folder / 'probe.kiln')
    fd = os.open(folder, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('kiln')
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--out')
    args = parser.parse_args()
    kiln = args.kiln
    rows = []
    with tempfile.TemporaryDirectory() as tmp, redis_server() as server:
        tmp = pathlib.Path(tmp)
        count = iter(range(10000))

        def fresh(**extra):
            return node_env(tmp / f'n{next(count)}', **extra)

        for arch in ('sm_90a', 'all'):
            compile_ms, remote_ms, disk_ms = [], [], []
            per_module_ms(kiln, fresh(KILN_REMOTE_CACHE=server.url), arch)  # fills Redis
            for _ in range(args.runs):
                compile_ms.append(per_module_ms(kiln, fresh(), arch)[0])
                env = fresh(KILN_REMOTE_CACHE=server.url)
                ms, report = per_module_ms(kiln, env, arch)
                if report['remote']['hits'] != report['modules']:
                    sys.exit(f'expected only remote hits, got {report["remote"]}')
                remote_ms.append(ms)
                disk_ms.append(per_module_ms(kiln, env, arch)[0])
            rows.append((arch, report['modules'], statistics.median(compile_ms), statistics.median(remote_ms),
                         statistics.median(disk_ms)))

        # Context for the remote row: a raw GET of one entry over loopback, and what publishing a file
        # of that size costs on this disk (write, fsync, rename, fsync the folder), as the disk cache does.
        client = server.client()
        name, value = next(iter(server.entries().items()))
        get_ms = statistics.median(timed(lambda: client.command('GET', name)) for _ in range(50))
        client.close()
        publish_ms = statistics.median(timed(lambda: publish_file(tmp, value)) for _ in range(20))
        stats = json.loads(subprocess.run([kiln, 'cache', 'stats', '--remote', '--json'],
                                          env=fresh(KILN_REMOTE_CACHE=server.url), capture_output=True,
                                          text=True, check=True).stdout)

        nodes = 16
        go = tmp / 'go'
        procs = [subprocess.Popen(['sh', '-c', 'while [ ! -e "$1" ]; do sleep 0.005; done; exec "$2" warm --arch all '
                                   '--jobs 2 --json', 'sh', str(go), kiln],
                                  env=fresh(KILN_REMOTE_CACHE=server.url + '/1',
                                            KILN_REMOTE_CACHE_LEASE_MS=120000, KILN_REMOTE_CACHE_WAIT_MS=120000,
                                            KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS=2000,
                                            KILN_REMOTE_CACHE_TIMEOUT_MS=2000),
                                  stdout=subprocess.PIPE, text=True) for _ in range(nodes)]
        time.sleep(0.5)
        start = time.monotonic()
        go.touch()
        reports = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
        burst_s = time.monotonic() - start
        modules = reports[0]['modules']
        compiles = sum(r['remote']['compiles'] for r in reports)
        hits = sum(r['remote']['hits'] for r in reports)
        waits = sum(r['remote']['lease_waits'] for r in reports)
        failures = sum(r['remote']['timeouts'] + r['remote']['errors'] for r in reports)

    lines = ['| arch | modules | compile, empty disk, no Redis | empty disk, warm Redis (loopback) | own disk after |',
             '| --- | --- | --- | --- | --- |']
    for arch, n, c, r, d in rows:
        lines.append(f'| {arch} | {n} | {c:.1f} ms/module | {r:.2f} ms/module | {d:.2f} ms/module |')
    lines += ['', f'Parts of the remote row, for one {len(value)}-byte value: a raw GET over loopback '
              f'{get_ms:.2f} ms (median of 50); writing it to disk as the disk cache does (write, fsync, rename, '
              f'fsync the folder) {publish_ms:.2f} ms (median of 20). The rest is process-side: the lock file, '
              'two disk lookups, decoding and verifying, the eviction pass.']
    lines += ['', '| target | entries | bytes in Redis | per entry |', '| --- | --- | --- | --- |']
    for target, value in sorted(stats['per_target'].items()):
        lines.append(f'| {target} | {value["entries"]} | {value["bytes"]} | {value["bytes"] // value["entries"]} |')
    lines.append(f'| all | {stats["entries"]} | {stats["bytes"]} | {stats["bytes"] // max(1, stats["entries"])} |')
    lines += ['', '| burst | nodes | keys | compiles | compiles per key | remote hits | lease waits | Redis failures | wall |',
              '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
              f'| `kiln warm --arch all --jobs 2`, empty disks, one Redis | {nodes} | {modules} | {compiles} | '
              f'{compiles / modules:.2f} | {hits} | {waits} | {failures} | {burst_s:.1f} s |',
              '', f'Load average during the run: {open("/proc/loadavg").read().split()[0]} on 2 cores.']
    text = '\n'.join(lines) + '\n'
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text)


if __name__ == '__main__':
    main()
