"""`kiln info`, the diagnostic command: a bad KILN_ARCH is reported beside everything else (exit
1 at the end), and each bad cache setting or switch is one warning and exit 0, as the README
promises."""
import json
import subprocess

import pytest


@pytest.fixture(scope='module')
def env(clean_env, tmp_path_factory):
    return {**clean_env, 'KILN_CACHE_DIR': str(tmp_path_factory.mktemp('info') / 'cache')}


def info(kiln, env, *args):
    return subprocess.run([kiln, 'info', *args], capture_output=True, text=True, env=env, timeout=240)


def parsed(done):
    try:
        return json.loads(done.stdout)
    except ValueError:
        pytest.fail(f'info --json prints JSON\n{done.stdout[:300]}{done.stderr[:300]}')


@pytest.fixture(scope='module')
def bad_arch_env(env):
    return {**env, 'KILN_ARCH': 'garbage', 'KILN_Q_ONE_GROUP': '0'}


@pytest.fixture(scope='module')
def bad_arch_info(kiln, bad_arch_env):
    return info(kiln, bad_arch_env)


def test_bad_arch_exits_1_naming_it(bad_arch_info):
    done = bad_arch_info
    assert done.returncode == 1, f'a bad KILN_ARCH: exit 1 (got {done.returncode})\n{done.stderr}'
    assert "KILN_ARCH: invalid 'garbage'" in done.stderr and 'sm_XY[a]' in done.stderr and '90' in done.stderr, \
        f'the bad setting is named with what is expected and the archs NVRTC supports\n{done.stderr}'


@pytest.mark.parametrize('part', ['NVRTC ', 'driver:', 'disk cache:', 'levers:', 'KILN_ARCH=garbage',
                                  'KILN_Q_ONE_GROUP=0 KILN_PDL=0', 'embedded modules:'])
def test_bad_arch_still_reports(bad_arch_info, part):
    assert part in bad_arch_info.stdout, f'info still reports {part!r}\n{bad_arch_info.stdout}'


def test_bad_arch_json(kiln, bad_arch_env):
    done = info(kiln, bad_arch_env, '--json')
    assert done.returncode == 1, f'a bad KILN_ARCH with --json: exit 1 (got {done.returncode})\n{done.stderr}'
    report = parsed(done)
    nvrtc = report.get('nvrtc', {})
    assert nvrtc.get('version', 'none') != 'none' and nvrtc.get('archs'), f'JSON reports NVRTC: {nvrtc}'
    assert 'driver' in report and 'disk_cache' in report and 'counters' in report, 'JSON reports the rest'
    assert report.get('default_target', '') is None, f"no default target ({report.get('default_target')})"
    assert report.get('levers', {}).get('KILN_ARCH') == 'garbage', f"the lever shows the value ({report.get('levers')})"
    assert report.get('levers', {}).get('KILN_Q_ONE_GROUP') is False, \
        f"the pick's lever shows off ({report.get('levers')})"
    problems = report.get('problems', [])
    assert len(problems) == 1 and problems[0].startswith("KILN_ARCH: invalid 'garbage'"), \
        f'JSON lists the problem: {problems}'


def test_good_settings(kiln, env):
    done = info(kiln, {**env, 'KILN_ARCH': 'sm_90a'}, '--json')
    assert done.returncode == 0, f'good settings: exit 0 (got {done.returncode})\n{done.stderr}'
    report = parsed(done)
    assert report.get('problems') == [] and report.get('default_target') == 'sm_90a', \
        f'no problem, target sm_90a\n{json.dumps(report)[:600]}'


@pytest.mark.parametrize('args', [(), ('--json',)], ids=['text', 'json'])
def test_one_warning_each(kiln, env, tmp_path, args):
    blocker = tmp_path / 'not-a-folder'
    blocker.write_text('')
    # KILN_JIT is read on every use, twice by info: still one warning.
    env = {**env, 'KILN_CACHE_DIR': str(blocker), 'KILN_CACHE_MAX_BYTES': 'lots', 'KILN_JIT': 'maybe',
           'KILN_LINEINFO': 'maybe'}
    done = info(kiln, env, *args)
    assert done.returncode == 0, f'info {args}: cache warnings are not errors (exit {done.returncode})\n{done.stderr}'
    lines = done.stderr.splitlines()
    folder = [line for line in lines if 'disk cache not used' in line]
    size = [line for line in lines if 'KILN_CACHE_MAX_BYTES' in line]
    assert len(folder) == 1 and str(blocker) in folder[0], \
        f'info {args}: one warning for the cache folder\n{done.stderr}'
    assert len(size) == 1, f'info {args}: one warning for KILN_CACHE_MAX_BYTES\n{done.stderr}'
    for lever in ('KILN_JIT', 'KILN_LINEINFO'):
        assert sum(f"{lever}='maybe'" in line for line in lines) == 1, \
            f'info {args}: one warning for {lever}\n{done.stderr}'
    mode = parsed(done).get('disk_cache', {}).get('mode', '') if args else done.stdout
    assert 'memory-only' in mode, f'info {args} reports the cache as memory-only\n{done.stdout[-500:]}'


def test_json_config_shows_the_effective_settings(kiln, env):
    settings = {'KILN_PDL': 'on', 'KILN_CACHE_MAX_BYTES': '64M', 'KILN_REMOTE_CACHE_LEASE_MS': '250',
                'KILN_Q_ONE_GROUP': 'maybe'}
    done = info(kiln, {**env, **settings}, '--json')
    assert done.returncode == 0, f'info --json: exit 0 (got {done.returncode})\n{done.stderr}'
    config = parsed(done).get('config', {})
    expected = {'KILN_PDL': True, 'KILN_CACHE_MAX_BYTES': 64 << 20, 'KILN_REMOTE_CACHE_LEASE_MS': 250,
                'KILN_Q_ONE_GROUP': True, 'KILN_JIT': True, 'KILN_ARCH': None, 'KILN_CACHE_DIR': env['KILN_CACHE_DIR']}
    for name, value in expected.items():
        assert config.get(name, 'missing') == value, f'config {name}: {value!r} (a bad value shows the default)\n{config}'
    assert "KILN_Q_ONE_GROUP='maybe'" in done.stderr, f'the bad value is warned about\n{done.stderr}'
