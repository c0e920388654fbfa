"""`kiln warm` across real processes on one cache folder, with the real compiler (no GPU needed):
8 processes started together compile each module exactly once in total; a new process hits the
disk for every module; a corrupted entry is healed (deleted, recompiled) and verifies afterwards;
`kiln info --json` reports the counters of what it resolved. A warm that keeps nothing (cache off,
folder unusable, every store failed) exits 1 and says why and which folder."""
import json
import os
import subprocess

import pytest


def warm_all(kiln, env, count):
    procs = [subprocess.Popen([kiln, 'warm', '--arch', 'sm_90a', '--jobs', '2', '--json'], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(count)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, f'warm exits 0 (stderr: {err.strip()[:300]})'
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_processes_share_one_folder(kiln, tmp_path):
    cache = tmp_path / 'cache'
    env = {**os.environ, 'KILN_CACHE_DIR': str(cache)}
    env.pop('KILN_CACHE', None)
    first = warm_all(kiln, env, 8)
    modules = first[0]['modules']
    assert modules == 2, f'sm_90a carries both quantizer modules (got {modules})'
    assert sum(r['compiles'] for r in first) == modules, \
        f'8 processes compile each module once in total (compiles {[r["compiles"] for r in first]})'
    assert all(r['compiles'] + r['disk_hits'] == modules for r in first), 'every process got every module'
    assert all(r['compile_ms'] > 0 for r in first if r['compiles'] > 0), \
        f'compile_ms counts the compiles ({[(r["compiles"], r["compile_ms"]) for r in first]})'
    assert all(r.get('kept') == modules for r in first), f'every process sees every module kept ({first[0]})'

    second = warm_all(kiln, env, 1)[0]
    assert second['compiles'] == 0 and second['disk_hits'] == modules, \
        f'a new process hits the disk for every module ({second})'

    entries = sorted(cache.glob('*.kiln'))
    assert len(entries) == modules, f'one entry per module ({len(entries)})'
    data = bytearray(entries[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    entries[0].write_bytes(bytes(data))
    healed = warm_all(kiln, env, 1)[0]
    assert healed['corrupt_healed'] == 1 and healed['compiles'] == 1 and healed['disk_hits'] == modules - 1, \
        f'a flipped byte is healed by one recompile ({healed})'
    verify = subprocess.run([kiln, 'cache', 'verify', '--json'], env=env, capture_output=True, text=True)
    assert verify.returncode == 0, f'every entry verifies afterwards ({verify.stdout.strip()[:300]})'

    # kiln info --json carries this process's counters: on a GPU it resolves the quantizer on
    # every device (disk hits now, the cache is warm); without one it loads nothing.
    info = json.loads(subprocess.run([kiln, 'info', '--json'], env=env, capture_output=True, text=True,
                                     check=True).stdout)
    counters = info['counters']
    wanted = {'memory_hits', 'disk_hits', 'compiles', 'compile_ms', 'corrupt_healed', 'lock_waits', 'evictions'}
    assert wanted <= counters.keys(), f'kiln info --json has the counters ({sorted(counters)})'
    resolved = [d for d in info['devices'] if d['fp8_act_quant'] is not None]
    assert counters['disk_hits'] + counters['compiles'] == sum(2 if d['fp8_act_quant']['twin'] else 1
                                                               for d in resolved), \
        f'info resolved the quantizer on {len(resolved)} device(s) through the caches ({counters})'


NOTHING_KEPT = {
    'KILN_CACHE=0': ({'KILN_CACHE': '0'}, ['KILN_CACHE=0', 'nothing can be kept']),
    'a regular file as the folder': ({'KILN_CACHE_DIR': '{blocker}'}, ['{blocker}', 'nothing can be kept']),
    'a folder under a regular file': ({'KILN_CACHE_DIR': '{blocker}/cache'}, ['{blocker}/cache', 'nothing can be kept']),
    # Every entry is larger than a 1-byte bound: each store fails with a warning, nothing is kept.
    'every store failed': ({'KILN_CACHE_DIR': '{tmp}/small', 'KILN_CACHE_MAX_BYTES': '1'},
                           ['{tmp}/small', '2 of 2 modules are not in the cache']),
}


@pytest.mark.parametrize('args', [(), ('--json',)], ids=['text', 'json'])
@pytest.mark.parametrize('what', NOTHING_KEPT)
def test_warm_that_keeps_nothing_fails(kiln, clean_env, tmp_path, what, args):
    """`kiln warm` exits 1, says why on stderr (every one of the words), and keeps nothing."""
    blocker = tmp_path / 'not-a-folder'
    blocker.write_text('')
    settings, words = NOTHING_KEPT[what]
    env = {**clean_env, **{k: v.format(blocker=blocker, tmp=tmp_path) for k, v in settings.items()}}
    words = [w.format(blocker=blocker, tmp=tmp_path) for w in words]
    done = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--jobs', '2', *args], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 1, f'{what} {args}: warm exits 1 (got {done.returncode}; {done.stderr.strip()[:300]})'
    assert all(word in done.stderr for word in words), f'{what} {args}: stderr names {words} ' \
                                                       f'({done.stderr.strip()[:400]})'
    if args:
        report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        assert report.get('kept') == 0 and 'error' in report, f'{what}: JSON says nothing was kept ({report})'
    else:
        assert '; cache \n' not in done.stdout, f'{what}: no empty folder in the summary ({done.stdout.strip()})'


def warm_report(kiln, env, *extra, cwd=None):
    done = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--json', *extra], env=env, capture_output=True,
                          text=True, timeout=240, cwd=cwd)
    lines = done.stdout.strip().splitlines()
    return done, (json.loads(lines[-1]) if lines else {})


@pytest.fixture(scope='module')
def bundle(kiln, clean_env, tmp_path_factory):
    """A bundle of sm_90a for the layer checks."""
    tmp = tmp_path_factory.mktemp('layers')
    path = tmp / 'layers.kpack'
    packed = subprocess.run([kiln, 'pack', '--arch', 'sm_90a', '-o', str(path), '--jobs', '1'],
                            env={**clean_env, 'KILN_CACHE_DIR': str(tmp / 'pack-cache')}, capture_output=True,
                            text=True, timeout=240)
    assert packed.returncode == 0, f'a bundle of sm_90a for the layer checks\n{packed.stderr[-300:]}'
    return path


@pytest.mark.parametrize('jit, jobs', [('off', '1'), ('on', '2')])
def test_bundle_layers(kiln, clean_env, tmp_path, bundle, jit, jobs):
    """warm searches every layer of KILN_CACHE_PATH: what a bundle holds is counted as a layer hit
    and never compiled, with KILN_JIT=off and with it on (workers included)."""
    folder = tmp_path / f'layers-{jit}'
    env = {**clean_env, 'KILN_CACHE_PATH': f'{bundle}:{folder}', 'KILN_JIT': jit}
    done, report = warm_report(kiln, env, '--jobs', jobs)
    what = f'KILN_JIT={jit} --jobs {jobs}'
    assert done.returncode == 0, f'{what}: warm over bundle:folder exits 0\n{done.stderr[-400:]}'
    assert 'in no cache layer' not in done.stderr, f'{what}: the bundle is searched\n{done.stderr[-400:]}'
    assert report.get('layer_hits') == 2 and report.get('compiles') == 0, \
        f'{what}: both modules counted as layer hits, none compiled ({report})'
    assert not list(folder.glob('*.kiln')), f'{what}: nothing compiled into the folder'
    text = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--jobs', jobs], env=env, capture_output=True,
                          text=True, timeout=240)
    assert text.returncode == 0 and '2 from read-only layers' in text.stdout and '0 compiled' in text.stdout, \
        f'{what}: the summary line says where they came from\n{text.stdout + text.stderr[-300:]}'


@pytest.mark.parametrize('extra, words', [({'KILN_LINEINFO': 'x'}, "KILN_LINEINFO='x'"),
                                          ({'KILN_REMOTE_CACHE': 'bogus://x'}, 'bogus://x')], ids=['lever', 'url'])
def test_one_warning_per_tree(kiln, clean_env, tmp_path, extra, words):
    """A warning about the environment is printed once by the whole process tree, however many
    `kiln worker` processes warm starts."""
    env = {**clean_env, 'KILN_CACHE_DIR': str(tmp_path / 'warn-cache'), **extra}
    # Cold and then warm: workers start either way with two modules and --jobs 2.
    for round in ('cold', 'warm'):
        done = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--jobs', '2'], env=env,
                              capture_output=True, text=True, timeout=240)
        # Why warning lines only: a command may end with its own failure line naming the reason.
        count = sum(1 for line in done.stderr.splitlines() if '[warning]' in line and words in line)
        # Why not the exit status for the URL: a requested remote tier that is off may be a failure.
        assert count == 1 and (done.returncode == 0 or 'KILN_REMOTE_CACHE' in extra), \
            f'{words} ({round}): one warning for the process tree (got {count}, exit {done.returncode})\n' + \
            done.stderr[-600:]


def test_relative_cache_dir(kiln, clean_env, tmp_path):
    """A relative KILN_CACHE_DIR is taken from the working directory and shown absolute."""
    env = {**clean_env, 'KILN_CACHE_DIR': 'relative-cache'}
    done, report = warm_report(kiln, env, '--jobs', '1', cwd=tmp_path)
    absolute = str(tmp_path / 'relative-cache')
    assert done.returncode == 0 and report.get('cache', {}).get('dir') == absolute, \
        f'warm: the folder is shown absolute ({report.get("cache")})\n{done.stderr[-300:]}'
    stats = subprocess.run([kiln, 'cache', 'stats', '--json'], env=env, capture_output=True, text=True, cwd=tmp_path)
    shown = json.loads(stats.stdout).get('dir') if stats.returncode == 0 else None
    assert shown == absolute, f'cache stats: the folder is shown absolute ({shown})\n{stats.stderr[-300:]}'
    info = subprocess.run([kiln, 'info', '--json'], env=env, capture_output=True, text=True, cwd=tmp_path)
    shown = json.loads(info.stdout).get('disk_cache', {}).get('dir') if info.stdout.strip() else None
    assert shown == absolute, f'info: the folder is shown absolute ({shown})\n{info.stderr[-300:]}'
