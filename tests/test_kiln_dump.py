#!/usr/bin/env python3
"""The `kiln dump` / `kiln compile` command lines, run as a user would (no GPU needed).

Usage: test_kiln_dump.py KILN_EXECUTABLE
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from checks import check, exit_status

def run(kiln, *args, env=None):
    return subprocess.run([kiln, *args], capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_dump_all(kiln, tmp):
    out = tmp / 'all'
    done = run(kiln, 'dump', '--arch', 'all', '--out', str(out), '--json')
    check(done.returncode == 0, f'dump --arch all exits 0 (stderr: {done.stderr})')
    report = json.loads(done.stdout)
    modules = json.loads(run(kiln, 'list', '--json').stdout)['modules']
    targets = sorted({row['target'] for row in report['compiles']})
    check('sm_90a' in targets and len(targets) >= 8, f'every NVRTC arch is a target: {targets}')
    expected = set()
    for module in modules:
        for target in targets:
            if module['family'] == 'hopper' and target not in ('sm_90', 'sm_90a'):
                continue
            for ext in ('cu', 'options', 'ptx', 'cubin', 'log'):
                expected.add(f"{module['module']}.{target}.{ext}")
    written = {p.name for p in out.iterdir()}
    check(written == expected, f'dump files: missing {sorted(expected - written)}, extra {sorted(written - expected)}')
    for row in report['compiles']:
        check(row.get('ptx_bytes', 0) > 0 and row.get('cubin_bytes', 0) > 0 and row.get('compile_ms', 0) > 0,
              f'{row} has PTX, CUBIN and a compile time')
        ptx = (out / f"{row['module']}.{row['target']}.ptx").read_text()
        module = next(m for m in modules if m['module'] == row['module'])
        for entry in module['entries']:
            check(f'.entry {entry}(' in ptx, f"{row['module']}.{row['target']}.ptx declares {entry}")
        options = (out / f"{row['module']}.{row['target']}.options").read_text().split('\n')
        check(options[0] == f"-arch={row['target']}", f'options start with -arch: {options}')


def test_table_and_sass(kiln, tmp):
    fake_bin = tmp / 'bin'
    fake_bin.mkdir()
    fake = fake_bin / 'cuobjdump'
    fake.write_text('#!/bin/sh\necho "SASS of $2"\n')
    fake.chmod(0o755)
    out = tmp / 'sass'
    env = {'PATH': f"{fake_bin}:{os.environ.get('PATH', '')}"}
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--module', 'per_token_group_quant_fp8', '--out', str(out),
               '--sass', env=env)
    check(done.returncode == 0, f'dump --sass exits 0 ({done.stderr})')
    check('per_token_group_quant_fp8    sm_90a' in done.stdout, f'one table line per module and target: {done.stdout}')
    sass = out / 'per_token_group_quant_fp8.sm_90a.sass'
    check(sass.exists() and 'per_token_group_quant_fp8.sm_90a.cubin' in sass.read_text(), 'the .sass file')
    # Without cuobjdump, --sass cannot do its job: a usage error before anything compiles, where it
    # used to exit 0 with the table saying "written" and no .sass file.
    out = tmp / 'no-cuobjdump'
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--module', 'per_token_group_quant_fp8', '--out', str(out),
               '--sass', env={'PATH': str(tmp / 'empty')})
    check(done.returncode == 2, f'dump --sass without cuobjdump exits 2, got {done.returncode}', done.stderr)
    check('--sass' in done.stderr and 'cuobjdump' in done.stderr and 'PATH' in done.stderr,
          'the message names --sass, cuobjdump and the PATH', done.stderr)
    check('compiled' not in done.stdout and not out.exists(), 'nothing compiled or written', done.stdout)


def test_failures(kiln, tmp):
    broken = tmp / 'broken.cu'
    broken.write_text('#include "fp8_e4m3.cuh"\nextern "C" __global__ void broken(float* p) {\n  p[0] = oops;\n}\n')
    done = run(kiln, 'compile', '--source', str(broken), '--arch', 'sm_90a')
    check(done.returncode == 1, f'a broken module exits 1, got {done.returncode}')
    check('  > 3 |   p[0] = oops;' in done.stderr, f'the error shows numbered source: {done.stderr}')

    done = run(kiln, 'compile', '--module', 'per_token_group_quant_fp8', env={'KILN_ARCH': 'sm_80a'})
    check(done.returncode == 1 and 'KILN_ARCH' in done.stderr, f'KILN_ARCH nonsense: {done.stderr}')
    done = run(kiln, 'compile', '--module', 'per_token_group_quant_fp8', env={'KILN_ARCH': 'sm_120'})
    check(done.returncode == 0 and 'sm_120 ' in done.stdout, f'--arch auto follows KILN_ARCH: {done.stdout}')
    done = run(kiln, 'compile', '--module', 'fp8_act_quant_hopper', '--arch', 'sm_100a')
    check(done.returncode == 1 and 'hopper' in done.stderr, f'the twin is not built for sm_100a: {done.stderr}')


def test_unwritable_out(kiln, tmp):
    blocker = tmp / 'not-a-folder'
    blocker.write_text('')
    out = blocker / 'dump'
    # A path that cannot be a folder is an invalid --out: a usage error, before anything compiles.
    for out in (blocker / 'dump', blocker):
        done = run(kiln, 'dump', '--arch', 'sm_90a', '--out', str(out))
        check(done.returncode == 2, f'--out {out.name}: a regular file in the way exits 2, got {done.returncode}')
        check('--out' in done.stderr and str(out) in done.stderr and 'nothing written' in done.stderr,
              f'the error names --out and the folder: {done.stderr}')
        check('written to' not in done.stdout and 'ptx B' not in done.stdout, f'no table, no "written to": {done.stdout}')

    # The folder exists but one module's .ptx cannot be put in place (a folder holds its name):
    # that module is reported as not written, the other as written, and the exit status is 1.
    out = tmp / 'blocked'
    (out / 'per_token_group_quant_fp8.sm_90a.ptx' / 'keep').mkdir(parents=True)
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--out', str(out))
    check(done.returncode == 1, f'a failed write exits 1, got {done.returncode}')
    check('per_token_group_quant_fp8.sm_90a.ptx' in done.stderr, f'the failed write is named: {done.stderr}')
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    check('NOT WRITTEN' in lines.get('per_token_group_quant_fp8', ''), f'the table marks it: {done.stdout}')
    check(lines.get('fp8_act_quant_hopper', '').endswith('written') and
          'NOT' not in lines.get('fp8_act_quant_hopper', ''), f'the other module is written: {done.stdout}')
    check(f'1 of 2 written to {out}' in done.stdout, f'the summary counts what was written: {done.stdout}')

    done = run(kiln, 'dump', '--arch', 'sm_90a', '--module', 'per_token_group_quant_fp8', '--out', str(out))
    check(done.returncode == 1 and f'nothing written to {out}' in done.stdout,
          f'nothing written is said so ({done.returncode}): {done.stdout}')
    done = run(kiln, 'dump', '--arch', 'sm_90a', '--module', 'per_token_group_quant_fp8', '--out', str(out), '--json')
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    rows = report.get('compiles', [{}])
    check(done.returncode == 1 and report.get('written') == 0 and rows[0].get('written') is False and
          'error' in rows[0], f'--json reports the module as not written: {report}')


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        test_dump_all(kiln, tmp)
        test_table_and_sass(kiln, tmp)
        test_failures(kiln, tmp)
        test_unwritable_out(kiln, tmp)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
