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

FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print(f'FAIL: {what}')


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


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        test_dump_all(kiln, tmp)
        test_table_and_sass(kiln, tmp)
        test_failures(kiln, tmp)
    print(f'{len(FAILURES)} failures')
    return 1 if FAILURES else 0


if __name__ == '__main__':
    sys.exit(main())
