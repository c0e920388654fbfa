"""The `kiln dump` / `kiln compile` command lines, run as a user would (no GPU needed)."""
import json
import os
import subprocess

import pytest


def run(kiln, *args, env=None):
    return subprocess.run([kiln, *args], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=240)


def test_dump_all(kiln, tmp_path):
    out = tmp_path / 'all'
    done = run(kiln, 'dump', '--arch', 'all', '--out', str(out), '--json')
    assert done.returncode == 0, f'dump --arch all exits 0 (stderr: {done.stderr})'
    report = json.loads(done.stdout)
    modules = json.loads(run(kiln, 'list', '--json').stdout)['modules']
    targets = sorted({row['target'] for row in report['compiles']})
    assert 'sm_90a' in targets and len(targets) >= 8, f'every NVRTC arch is a target: {targets}'
    expected = set()
    for module in modules:
        for target in targets:
            if module['family'] == 'hopper' and target not in ('sm_90', 'sm_90a'):
                continue
            for ext in ('cu', 'options', 'ptx', 'cubin', 'log'):
                expected.add(f"{module['module']}.{target}.{ext}")
    written = {p.name for p in out.iterdir()}
    assert written == expected, f'dump files: missing {sorted(expected - written)}, extra {sorted(written - expected)}'
    for row in report['compiles']:
        assert row.get('ptx_bytes', 0) > 0 and row.get('cubin_bytes', 0) > 0 and row.get('compile_ms', 0) > 0, \
            f'{row} has PTX, CUBIN and a compile time'
        ptx = (out / f"{row['module']}.{row['target']}.ptx").read_text()
        module = next(m for m in modules if m['module'] == row['module'])
        for entry in module['entries']:
            assert f'.entry {entry}(' in ptx, f"{row['module']}.{row['target']}.ptx declares {entry}"
        options = (out / f"{row['module']}.{row['target']}.options").read_text().split('\n')
        assert options[0] == f"-arch={row['target']}", f'options start with -arch: {options}'


def test_table_and_sass(kiln, tmp_path):
    fake_bin = tmp_path / 'bin'
    fake_bin.mkdir()
    fake = fake_bin / 'cuobjdump'
    fake.write_text('#!/bin/sh\necho "SASS of $2"\n')
    fake.chmod(0o755)
    out = tmp_path / 'sass'
    env = {'PATH': f"{fake_bin}:{os.environ.get('PATH', '')}"}
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--module', 'per_token_group_quant_fp8', '--out', str(out),
               '--sass', env=env)
    assert done.returncode == 0, f'dump --sass exits 0 ({done.stderr})'
    assert 'per_token_group_quant_fp8    sm_90a' in done.stdout, f'one table line per module and target: {done.stdout}'
    sass = out / 'per_token_group_quant_fp8.sm_90a.sass'
    assert sass.exists() and 'per_token_group_quant_fp8.sm_90a.cubin' in sass.read_text(), 'the .sass file'


def test_sass_without_cuobjdump(kiln, tmp_path):
    # --sass cannot do its job without cuobjdump: a usage error before anything compiles.
    out = tmp_path / 'no-cuobjdump'
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--module', 'per_token_group_quant_fp8', '--out', str(out),
               '--sass', env={'PATH': str(tmp_path / 'empty')})
    assert done.returncode == 2, f'dump --sass without cuobjdump exits 2, got {done.returncode}\n{done.stderr}'
    assert '--sass' in done.stderr and 'cuobjdump' in done.stderr and 'PATH' in done.stderr, \
        f'the message names --sass, cuobjdump and the PATH\n{done.stderr}'
    assert 'compiled' not in done.stdout and not out.exists(), f'nothing compiled or written\n{done.stdout}'


def test_broken_module_shows_numbered_source(kiln, tmp_path):
    broken = tmp_path / 'broken.cu'
    broken.write_text('#include "fp8_e4m3.cuh"\nextern "C" __global__ void broken(float* p) {\n  p[0] = oops;\n}\n')
    done = run(kiln, 'compile', '--source', str(broken), '--arch', 'sm_90a')
    assert done.returncode == 1, f'a broken module exits 1, got {done.returncode}'
    assert '  > 3 |   p[0] = oops;' in done.stderr, f'the error shows numbered source: {done.stderr}'


def test_arch_from_the_environment(kiln):
    done = run(kiln, 'compile', '--module', 'per_token_group_quant_fp8', env={'KILN_ARCH': 'sm_80a'})
    assert done.returncode == 1 and 'KILN_ARCH' in done.stderr, f'KILN_ARCH nonsense: {done.stderr}'
    done = run(kiln, 'compile', '--module', 'per_token_group_quant_fp8', env={'KILN_ARCH': 'sm_120'})
    assert done.returncode == 0 and 'sm_120 ' in done.stdout, f'--arch auto follows KILN_ARCH: {done.stdout}'


def test_twin_not_built_for_blackwell(kiln):
    done = run(kiln, 'compile', '--module', 'fp8_act_quant_hopper', '--arch', 'sm_100a')
    assert done.returncode == 1 and 'hopper' in done.stderr, f'the twin is not built for sm_100a: {done.stderr}'


@pytest.mark.parametrize('below', [True, False], ids=['folder under a file', 'a file'])
def test_out_that_cannot_be_a_folder(kiln, tmp_path, below):
    # A path that cannot be a folder is an invalid --out: a usage error, before anything compiles.
    blocker = tmp_path / 'not-a-folder'
    blocker.write_text('')
    out = blocker / 'dump' if below else blocker
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--out', str(out))
    assert done.returncode == 2, f'--out {out.name}: a regular file in the way exits 2, got {done.returncode}'
    assert '--out' in done.stderr and str(out) in done.stderr and 'nothing written' in done.stderr, \
        f'the error names --out and the folder: {done.stderr}'
    assert 'written to' not in done.stdout and 'ptx B' not in done.stdout, f'no table, no "written to": {done.stdout}'


def test_failed_write(kiln, tmp_path):
    # The folder exists but one module's .ptx cannot be put in place (a folder holds its name):
    # that module is reported as not written, the other as written, and the exit status is 1.
    out = tmp_path / 'blocked'
    (out / 'per_token_group_quant_fp8.sm_90a.ptx' / 'keep').mkdir(parents=True)
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--out', str(out))
    assert done.returncode == 1, f'a failed write exits 1, got {done.returncode}'
    assert 'per_token_group_quant_fp8.sm_90a.ptx' in done.stderr, f'the failed write is named: {done.stderr}'
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert 'NOT WRITTEN' in lines.get('per_token_group_quant_fp8', ''), f'the table marks it: {done.stdout}'
    assert lines.get('fp8_act_quant_hopper', '').endswith('written') and \
        'NOT' not in lines.get('fp8_act_quant_hopper', ''), f'the other module is written: {done.stdout}'
    assert f'1 of 2 written to {out}' in done.stdout, f'the summary counts what was written: {done.stdout}'

    done = run(kiln, 'dump', '--arch', 'sm_90a', '--module', 'per_token_group_quant_fp8', '--out', str(out))
    assert done.returncode == 1 and f'nothing written to {out}' in done.stdout, \
        f'nothing written is said so ({done.returncode}): {done.stdout}'
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--module', 'per_token_group_quant_fp8', '--out', str(out), '--json')
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    rows = report.get('compiles', [{}])
    assert done.returncode == 1 and report.get('written') == 0 and rows[0].get('written') is False and \
        'error' in rows[0], f'--json reports the module as not written: {report}'
