"""`kiln pack` end to end (real NVRTC, no GPU): packing twice gives identical bytes; --list and
--verify; a corrupted and a truncated bundle fail --verify (exit 1, saying why) and are refused by a
process that then carries on; usage errors exit 2; then the bundle is moved to another folder tree
and used from another working directory by a process with NVRTC hidden (KILN_NVRTC_LIBRARY pointing
nowhere, no toolkit on LD_LIBRARY_PATH), which resolves both quantizer modules up to the (fake)
driver without loading NVRTC (test_deploy_no_nvrtc); with KILN_JIT=off and an empty path, `kiln
info` reports no compile and the layer states."""
import json
import os
import pathlib
import pty
import select
import shutil
import subprocess
import tempfile

import pytest


def run(args, env, cwd=None):
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope='module')
def tmp():
    # Why not pytest's tmp_path_factory: its folders sit under a mode-0700 parent, which the
    # other-user check's uid 65534 could not enter.
    folder = pathlib.Path(tempfile.mkdtemp(prefix='kiln-pack-test-'))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope='module')
def env(tmp):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp / 'cache'))
    env.pop('KILN_CACHE_PATH', None)
    env.pop('KILN_REMOTE_CACHE_KEY_FILE', None)
    return env


@pytest.fixture(scope='module')
def first_pack(kiln, env, tmp):
    """`kiln pack` of sm_90a and sm_100a into build/a.kpack, run from build/."""
    build = tmp / 'build'
    build.mkdir()
    done = run([kiln, 'pack', '--arch', 'sm_90a,sm_100a', '-o', 'a.kpack', '--jobs', '2', '--json'], env, cwd=build)
    assert done.returncode == 0, f'pack exits 0\n{done.stderr[-500:]}'
    return done, build / 'a.kpack'


@pytest.fixture(scope='module')
def packed(first_pack):
    return first_pack[1].read_bytes()


def test_pack_twice_gives_identical_bytes(kiln, env, first_pack):
    first, bundle = first_pack
    report = json.loads(first.stdout)
    assert report.get('entries') == 3, f'3 entries: both modules for sm_90a, the shared one for sm_100a ({report})'
    assert first.stderr.strip() == '', f'no progress when stderr is not a terminal ({first.stderr[-300:]!r})'
    second = run([kiln, 'pack', '--arch', 'sm_90a,sm_100a', '-o', str(bundle.parent / 'b.kpack')], env)
    assert second.returncode == 0 and '3 entries' in second.stdout, \
        f'pack again, from the caches\n{second.stdout + second.stderr}'
    a, b = bundle.read_bytes(), (bundle.parent / 'b.kpack').read_bytes()
    assert a == b, f'packed twice: identical bytes ({len(a)} and {len(b)})'
    assert bundle.stat().st_mode & 0o777 == 0o644, 'the bundle is mode 0644'


@pytest.mark.parametrize('extra, shown', [([], True), (['--json'], False)], ids=['text', 'json'])
def test_progress_on_a_terminal(kiln, env, tmp, first_pack, extra, shown):
    # On a terminal, one progress line (rewritten with \r); with --json, none.
    leader, follower = pty.openpty()
    done = subprocess.run([kiln, 'pack', '--arch', 'sm_90a', '-o', str(tmp / 'tty.kpack'), '--jobs', '1', *extra],
                          env=env, stdout=subprocess.PIPE, stderr=follower, timeout=240)
    os.close(follower)
    seen = b''
    # Why a 0.2 s select: the program has exited, so what it wrote is already in the terminal's
    # buffer; the timeout only ends the read once that is drained (a pty gives no EOF).
    while select.select([leader], [], [], 0.2)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    text = seen.decode(errors='replace')
    assert done.returncode == 0 and (('[2/2]' in text and 'from caches' in text) == shown), \
        f'progress on a terminal {"shown" if shown else "not shown with --json"}\n{text[-300:]!r}'


def test_list_and_verify(kiln, env, first_pack):
    bundle = first_pack[1]
    listed = run([kiln, 'pack', '--list', str(bundle), '--json'], env)
    info = json.loads(listed.stdout) if listed.returncode == 0 else {}
    modules = sorted((e['module'], e['target']) for e in info.get('entries', []))
    assert modules == [('fp8_act_quant_hopper', 'sm_90a'), ('per_token_group_quant_fp8', 'sm_100a'),
                       ('per_token_group_quant_fp8', 'sm_90a')], f'--list shows what it holds ({modules})'
    assert info.get('matches_this_nvrtc') is True and info.get('nvrtc', '').startswith('build-id '), \
        f'--list names the NVRTC build ({info.get("nvrtc")})'
    verified = run([kiln, 'pack', '--verify', str(bundle)], env)
    assert verified.returncode == 0 and 'OK, 3 entries verified' in verified.stdout, \
        f'--verify: OK\n{verified.stdout + verified.stderr}'


def corrupted(data):
    changed = bytearray(data)
    changed[len(changed) // 2] ^= 0x40
    return bytes(changed)


@pytest.mark.parametrize('name, damage, why', [('corrupt.kpack', corrupted, 'checksum mismatch'),
                                               ('truncated.kpack', lambda data: data[:len(data) - 100], 'truncated')])
def test_damaged_bundle(kiln, env, tmp, first_pack, packed, name, damage, why):
    path = tmp / name
    path.write_bytes(damage(packed))
    bad = run([kiln, 'pack', '--verify', str(path)], env)
    assert bad.returncode == 1 and why in bad.stderr, f'--verify {name}: exit 1, says {why!r}\n' \
                                                      f'{bad.returncode} {bad.stderr[-300:]}'
    used = run([kiln, 'info', '--json'], dict(env, KILN_CACHE_PATH=f'{path}:{first_pack[1]}'))
    layers = json.loads(used.stdout)['cache_path']['layers'] if used.returncode == 0 else []
    assert len(layers) == 2 and not layers[0]['usable'] and why in layers[0]['state'] and layers[1]['usable'], \
        f'a process refuses {name} as a whole and carries on with the next layer\n{str(layers)[:400]}'
    assert 'not used' in used.stderr and why in used.stderr, f'{name}: one warning naming why\n{used.stderr[-300:]}'


@pytest.mark.parametrize('at, mask, why', [(12, 0x02, 'unknown flags'), (15, 0x80, 'unknown flags'),
                                           (12, 0x01, 'all zeros'), (50, 0x5a, 'not all zeros'),
                                           (71, 0x01, 'not all zeros')])
def test_header_bytes(kiln, env, tmp, packed, at, mask, why):
    """Header bytes the checksum does not cover are checked too."""
    changed = bytearray(packed)
    changed[at] ^= mask
    path = tmp / f'header-{at}-{mask}.kpack'
    path.write_bytes(bytes(changed))
    bad = run([kiln, 'pack', '--verify', str(path)], env)
    assert bad.returncode == 1 and why in bad.stderr, f'--verify, byte {at} ^ {mask:#x}: exit 1, says {why!r}\n' \
                                                      f'{bad.returncode} {bad.stdout[-200:]} {bad.stderr[-300:]}'
    used = run([kiln, 'info', '--json'], dict(env, KILN_CACHE_PATH=str(path)))
    layers = json.loads(used.stdout)['cache_path']['layers'] if used.stdout.strip() else []
    assert len(layers) == 1 and not layers[0]['usable'], \
        f'byte {at} ^ {mask:#x}: a process refuses the bundle\n{str(layers)[:300]}'


def test_signed_bundle(kiln, env, tmp):
    """A signed bundle without a key to check it is not reported as verified."""
    key = tmp / 'fleet.key'
    key.write_text('0123456789abcdef0123456789abcdef\n')
    key.chmod(0o600)
    signed = tmp / 'signed.kpack'
    done = run([kiln, 'pack', '--arch', 'sm_90a', '-o', str(signed)], dict(env, KILN_REMOTE_CACHE_KEY_FILE=str(key)))
    assert done.returncode == 0 and 'signed' in done.stdout, \
        f'pack with a key writes a signed bundle\n{done.stdout + done.stderr[-300:]}'
    unchecked = run([kiln, 'pack', '--verify', str(signed)], env)
    assert unchecked.returncode == 1 and 'not verified' in unchecked.stderr and 'OK' not in unchecked.stdout, \
        'a signed bundle with no key to check it: --verify exits 1, "not verified"\n' \
        f'{unchecked.returncode} {unchecked.stdout[-300:]} {unchecked.stderr[-300:]}'
    allowed = run([kiln, 'pack', '--verify', str(signed), '--allow-unverified'], env)
    assert allowed.returncode == 0 and 'signature not checked' in allowed.stdout, \
        '--allow-unverified: exit 0, and the summary says the signature was not checked\n' \
        f'{allowed.returncode} {allowed.stdout[-300:]} {allowed.stderr[-300:]}'
    report = run([kiln, 'pack', '--verify', str(signed), '--json'], env)
    out = json.loads(report.stdout) if report.stdout.strip() else {}
    assert report.returncode == 1 and out.get('ok') is False and out.get('signature_verified') is False, \
        f'--verify --json: not ok, signature not verified ({out.get("ok")}, {out.get("signature_verified")})'
    verified = run([kiln, 'pack', '--verify', str(signed)], dict(env, KILN_REMOTE_CACHE_KEY_FILE=str(key)))
    assert verified.returncode == 0 and 'verified' in verified.stdout, \
        f'with the key: verified, exit 0\n{verified.stdout + verified.stderr[-300:]}'
    done = run([kiln, 'pack', '--list', str(signed), '--allow-unverified'], env)
    assert done.returncode == 2 and '--allow-unverified' in done.stderr, \
        f'--allow-unverified only with --verify\n{done.returncode} {done.stderr[-300:]}'


@pytest.mark.parametrize('args, what', [(['--arch', 'sm_90a'], 'no -o'),
                                        (['-o', '{tmp}/x.kpack'], 'no --arch'),
                                        (['--arch', 'sm_90a', '-o', '{tmp}/x.kpack', '--jobs', '0'], '--jobs 0'),
                                        (['--arch', 'sm_999', '-o', '{tmp}/x.kpack'], 'unknown arch')],
                         ids=lambda v: v if isinstance(v, str) else None)
def test_usage_error(kiln, env, tmp_path, args, what):
    done = run([kiln, 'pack', *(a.format(tmp=tmp_path) for a in args)], env)
    assert done.returncode == 2, f'pack {what}: usage error, exit 2 (got {done.returncode})\n{done.stderr[-300:]}'


@pytest.mark.parametrize('out, why', [('{tmp}', 'folder'), ('{tmp}/out-blocker/x.kpack', 'not a folder'),
                                      ('{tmp}/missing/x.kpack', 'No such')])
def test_out_checked_first(kiln, env, tmp_path, out, why):
    """-o is checked before anything compiles: a folder, a path under a regular file or in a missing
    folder is a usage error (exit 2) naming -o, and the cache stays empty."""
    fresh = dict(env, KILN_CACHE_DIR=str(tmp_path / 'out-cache'))
    (tmp_path / 'out-blocker').write_text('')
    out = out.format(tmp=tmp_path)
    done = run([kiln, 'pack', '--arch', 'sm_90a', '-o', out], fresh)
    assert done.returncode == 2 and '-o' in done.stderr and out in done.stderr and why in done.stderr, \
        f'pack -o {out}: exit 2, names -o, the path and {why!r}\n{done.returncode} {done.stderr[-400:]}'
    entries = list((tmp_path / 'out-cache').glob('*.kiln'))
    assert not entries, f'pack -o {out}: nothing compiled ({len(entries)} entries)'


def test_unknown_variant_is_a_usage_error(kiln, env, tmp_path):
    variants = tmp_path / 'variants.txt'
    variants.write_text('# a variant manifest (kiln warm --variants)\nper_token_group_quant in=fp16 group=64\n'
                        'no_such_variant\n')
    done = run([kiln, 'pack', '--arch', 'sm_90a', '--variants', str(variants), '-o', str(tmp_path / 'x.kpack')], env)
    assert done.returncode == 2 and 'variants.txt:3' in done.stderr and 'no_such_variant' in done.stderr, \
        f'--variants: an unknown name is a usage error naming the line\n{done.stderr[-300:]}'
    assert not (tmp_path / 'x.kpack').exists(), 'nothing written after a usage error'


@pytest.fixture(scope='module')
def deployed(kiln, env, tmp):
    """A bundle packed in a build folder, moved to another folder tree; the build folder removed."""
    build = tmp / 'deploy-build'
    build.mkdir()
    done = run([kiln, 'pack', '--arch', 'sm_90a,sm_100a', '-o', 'a.kpack'], env, cwd=build)
    assert done.returncode == 0, f'pack for the deployment\n{done.stderr[-500:]}'
    folder = tmp / 'image' / 'opt' / 'model'
    folder.mkdir(parents=True)
    shutil.move(str(build / 'a.kpack'), str(folder / 'kernels.kpack'))
    shutil.rmtree(build)
    return folder / 'kernels.kpack'


@pytest.fixture(scope='module')
def elsewhere(tmp):
    folder = tmp / 'elsewhere'
    folder.mkdir()
    return folder


@pytest.fixture(scope='module')
def hidden(env, tmp, deployed, elsewhere):
    """NVRTC hidden: KILN_NVRTC_LIBRARY pointing nowhere, no toolkit on LD_LIBRARY_PATH."""
    path = ':'.join(p for p in os.environ.get('LD_LIBRARY_PATH', '').split(':') if p and 'cuda' not in p)
    hidden = {k: v for k, v in env.items() if k not in ('KILN_CACHE_DIR',)}
    hidden.update(KILN_NVRTC_LIBRARY=str(tmp / 'no' / 'libnvrtc.so.13'), LD_LIBRARY_PATH=path,
                  KILN_TEST_BUNDLE=str(deployed), HOME=str(elsewhere))
    return hidden


def test_moved_bundle_with_nvrtc_hidden(deploy_test, hidden, elsewhere):
    done = run([deploy_test], hidden, cwd=elsewhere)
    assert done.returncode == 0, \
        f'NVRTC hidden: both quantizer modules from the moved bundle, up to the driver\n{done.stdout[-1500:]}'


def test_moved_bundle_as_another_user(deploy_test, hidden, tmp, elsewhere):
    """uid 65534 runs a copy of the deploy test over the same bundle: the bundle keys hold no owner,
    path or $HOME. Why a copy, with the build's own libraries beside it: the build folder may sit
    where that user cannot reach (under /root)."""
    if os.geteuid() != 0:
        pytest.skip('switching to uid 65534 needs root (CI runs as root, where this runs)')
    assert shutil.which('setpriv') is not None, 'as root, setpriv is there to run the other-user check'
    switch = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']
    exe = tmp / 'other-user'
    (exe / 'lib').mkdir(parents=True)
    shutil.copy(deploy_test, exe / 'test_deploy_no_nvrtc')
    listed = run(['ldd', deploy_test], hidden)
    # Why only libraries outside the system folders: those are the build's (subprojects); kiln itself
    # is linked into the test statically (docs/architecture.md#what-the-library-exports).
    libraries = [parts[2] for parts in (line.split() for line in listed.stdout.splitlines())
                 if len(parts) >= 4 and parts[1] == '=>' and parts[2].startswith('/')
                 and not parts[2].startswith(('/lib/', '/lib64/', '/usr/lib/', '/usr/lib64/'))]
    assert listed.returncode == 0 and 'not found' not in listed.stdout, \
        f"ldd finds the deploy test's libraries\n{listed.stdout[-1000:]}{listed.stderr[-300:]}"
    for library in libraries:
        shutil.copy(library, exe / 'lib' / pathlib.Path(library).name)
    for folder in (tmp, tmp / 'image', tmp / 'image' / 'opt', tmp / 'image' / 'opt' / 'model', elsewhere, exe,
                   exe / 'lib'):
        os.chmod(folder, 0o755)
    env = dict(hidden, LD_LIBRARY_PATH=':'.join(p for p in (str(exe / 'lib'), hidden.get('LD_LIBRARY_PATH')) if p))
    other = run(switch + [str(exe / 'test_deploy_no_nvrtc')], env, cwd=elsewhere)
    assert other.returncode == 0, 'another user (uid 65534): both quantizer modules from the same bundle\n' + \
        other.stdout[-1500:] + other.stderr[-500:]


def test_bundle_served_without_loading_nvrtc(deploy_test, env, deployed, elsewhere):
    visible = {k: v for k, v in env.items() if k not in ('KILN_CACHE_DIR', 'KILN_JIT', 'KILN_NVRTC_LIBRARY')}
    visible.update(KILN_CACHE_PATH=str(deployed), HOME=str(elsewhere))
    done = run([deploy_test, '[jit_on]'], visible, cwd=elsewhere)
    assert done.returncode == 0, \
        f'NVRTC present, KILN_JIT on: the bundle serves both modules without loading NVRTC\n{done.stdout[-1500:]}'


def test_info_in_a_read_only_deployment(kiln, hidden, deployed):
    info = run([kiln, 'info', '--json'], dict(hidden, KILN_CACHE_PATH=str(deployed), KILN_JIT='off'))
    report = json.loads(info.stdout) if info.stdout.strip() else {}
    found = report.get('nvrtc_found', {})
    assert found.get('found') is False and 'no NVRTC' in found.get('meaning', ''), \
        f'info: no NVRTC, and what that means ({found})'
    layers = report.get('cache_path', {}).get('layers', [])
    assert len(layers) == 1 and layers[0]['usable'] and layers[0]['per_target'].get('sm_90a') == 2, \
        f'info: the bundle layer and what it holds for sm_90a ({layers})'
    assert info.stderr.strip() == '', f'a read-only deployment warns about nothing ({info.stderr.strip()[:300]})'
