#!/usr/bin/env python3
"""The quantizer family on the command line, with the real compiler (no GPU needed): `kiln list`
shows the family's parameters and allowed values and every variant; `kiln warm --variants` compiles
exactly the manifest's variants (each once, a second warm hits the disk, a variant already warmed
is not recompiled when another is added), and refuses a bad manifest before compiling anything.

Usage: test_kiln_variants.py KILN_EXECUTABLE
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from checks import check, exit_status


def run(kiln, env, *args):
    return subprocess.run([kiln, *args], env=env, capture_output=True, text=True, timeout=240)


def warm(kiln, env, manifest):
    done = run(kiln, env, 'warm', '--arch', 'sm_90a', '--jobs', '2', '--json', '--variants', str(manifest))
    check(done.returncode == 0, f'warm --variants exits 0 ({done.stderr.strip()[:300]})')
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    kiln = sys.argv[1]
    base = {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}
    listed = run(kiln, base, 'list', '--json', '--variants')
    check(listed.returncode == 0, 'kiln list --json --variants exits 0')
    families = json.loads(listed.stdout)['variant_families']
    check([f['module'] for f in families] == ['per_token_group_quant'], f'one family is listed ({families})')
    family = families[0]
    params = {p['name']: p['values'] for p in family['parameters']}
    check(params == {'in': ['bf16', 'fp16', 'fp32'], 'group': ['32', '64', '128'], 'out': ['e4m3', 'int8'],
                     'scales': ['row', 'col', 'col_tma', 'packed'], 'ue8m0': ['0', '1'], 'silu': ['0', '1']},
          f'parameters and allowed values ({params})')
    check(family['variant_count'] == 180 and len(set(family['variants'])) == 180, 'all 180 variants, each once')
    table = run(kiln, base, 'list')
    check('variant family per_token_group_quant' in table.stdout and 'bf16|fp16|fp32' in table.stdout,
          'the table shows the family and its values')

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        env = {**base, 'KILN_CACHE_DIR': str(tmp / 'cache')}
        one = tmp / 'one.txt'
        one.write_text('# attention\nper_token_group_quant in=fp16 group=64 out=int8\n')
        first = warm(kiln, env, one)
        # The two embedded modules plus the one variant, each compiled once.
        check(first['modules'] == 3 and first['compiles'] == 3 and first['kept'] == 3, f'first warm ({first})')
        names = sorted(p.name.split('.')[0] for p in (tmp / 'cache').glob('*.kiln'))
        check('per_token_group_quant-fp16-g64-int8-row' in names, f'the entry is named by the variant ({names})')
        two = tmp / 'two.txt'
        two.write_text('per_token_group_quant-fp16-g64-int8-row\nper_token_group_quant in=fp32 scales=packed ue8m0=1 silu=1\n')
        second = warm(kiln, env, two)
        check(second['compiles'] == 1 and second['disk_hits'] == 3, f'only the new variant compiles ({second})')

        for text, words in (('per_token_group_quant group=48\n', ["'group'", '32, 64, 128', ':1:']),
                            ('per_token_group_quant\nper_token_group_quant out=int8 ue8m0=1\n', ["'ue8m0'", ':2:']),
                            ('no_such_family\n', ['per_token_group_quant'])):
            bad = tmp / 'bad.txt'
            bad.write_text(text)
            done = run(kiln, {**base, 'KILN_CACHE_DIR': str(tmp / 'other')}, 'warm', '--arch', 'sm_90a', '--variants',
                       str(bad))
            check(done.returncode == 2, f'a bad manifest is a usage error ({text.strip()!r}: {done.returncode})')
            check(all(w in done.stderr for w in words), f'the message names {words} ({done.stderr.strip()})')
            check(not list((tmp / 'other').glob('*.kiln')), 'nothing was compiled')
        # The same variant twice (in both spellings) is one module, compiled and counted once.
        twice = tmp / 'twice.txt'
        twice.write_text('per_token_group_quant in=bf16 group=32 out=int8\nper_token_group_quant-bf16-g32-int8-row\n'
                         'per_token_group_quant in=bf16 group=32 out=int8\n')
        report = warm(kiln, {**base, 'KILN_CACHE_DIR': str(tmp / 'twice-cache')}, twice)
        check(report['modules'] == 3 and report['compiles'] == 3 and report['kept'] == 3,
              f'a duplicate manifest line is counted once ({report})')
        missing = run(kiln, env, 'warm', '--variants', str(tmp / 'absent.txt'))
        check(missing.returncode == 2, 'a manifest that does not exist is a usage error')
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
