"""The quantizer family on the command line, with the real compiler (no GPU needed): `kiln list`
shows the family's parameters and allowed values and every variant; `kiln warm --variants` compiles
exactly the manifest's variants (each once, a second warm hits the disk, a variant already warmed
is not recompiled when another is added), and refuses a bad manifest before compiling anything."""
import json
import subprocess

import pytest


def run(kiln, env, *args):
    return subprocess.run([kiln, *args], env=env, capture_output=True, text=True, timeout=240)


def warm(kiln, env, manifest):
    done = run(kiln, env, 'warm', '--arch', 'sm_90a', '--jobs', '2', '--json', '--variants', str(manifest))
    assert done.returncode == 0, f'warm --variants exits 0 ({done.stderr.strip()[:300]})'
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_list_shows_the_families(kiln, clean_env):
    listed = run(kiln, clean_env, 'list', '--json', '--variants')
    assert listed.returncode == 0, 'kiln list --json --variants exits 0'
    families = json.loads(listed.stdout)['variant_families']
    assert [f['module'] for f in families] == ['per_token_group_quant', 'per_token_group_quant_batched'], \
        'the quantizer family and its batched form are listed'
    for family in families:
        params = {p['name']: p['values'] for p in family['parameters']}
        assert params == {'in': ['bf16', 'fp16', 'fp32'], 'group': ['32', '64', '128'], 'out': ['e4m3', 'int8'],
                          'scales': ['row', 'col', 'col_tma', 'packed'], 'ue8m0': ['0', '1'], 'silu': ['0', '1']}, \
            f'{family["module"]}: parameters and allowed values ({params})'
        assert family['variant_count'] == 180 and len(set(family['variants'])) == 180, \
            f'{family["module"]}: all 180 variants, each once'
        assert all(v.startswith(family['module'] + '-') for v in family['variants']), 'names start with the family'
    table = run(kiln, clean_env, 'list')
    assert 'variant family per_token_group_quant' in table.stdout and 'bf16|fp16|fp32' in table.stdout, \
        'the table shows the family and its values'


def test_warm_compiles_the_manifest(kiln, clean_env, tmp_path):
    env = {**clean_env, 'KILN_CACHE_DIR': str(tmp_path / 'cache')}
    one = tmp_path / 'one.txt'
    one.write_text('# attention\nper_token_group_quant in=fp16 group=64 out=int8\n')
    first = warm(kiln, env, one)
    # The two embedded modules plus the one variant, each compiled once.
    assert first['modules'] == 3 and first['compiles'] == 3 and first['kept'] == 3, f'first warm ({first})'
    names = sorted(p.name.split('.')[0] for p in (tmp_path / 'cache').glob('*.kiln'))
    assert 'per_token_group_quant-fp16-g64-int8-row' in names, f'the entry is named by the variant ({names})'
    two = tmp_path / 'two.txt'
    two.write_text('per_token_group_quant-fp16-g64-int8-row\nper_token_group_quant in=fp32 scales=packed ue8m0=1 silu=1\n')
    second = warm(kiln, env, two)
    assert second['compiles'] == 1 and second['disk_hits'] == 3, f'only the new variant compiles ({second})'


@pytest.mark.parametrize('text, words', [
    ('per_token_group_quant group=48\n', ["'group'", '32, 64, 128', ':1:']),
    ('per_token_group_quant\nper_token_group_quant out=int8 ue8m0=1\n', ["'ue8m0'", ':2:']),
    ('no_such_family\n', ['per_token_group_quant']),
], ids=['bad value', 'bad combination', 'unknown family'])
def test_bad_manifest_is_a_usage_error(kiln, clean_env, tmp_path, text, words):
    bad = tmp_path / 'bad.txt'
    bad.write_text(text)
    done = run(kiln, {**clean_env, 'KILN_CACHE_DIR': str(tmp_path / 'other')}, 'warm', '--arch', 'sm_90a',
               '--variants', str(bad))
    assert done.returncode == 2, f'a bad manifest is a usage error ({text.strip()!r}: {done.returncode})'
    assert all(w in done.stderr for w in words), f'the message names {words} ({done.stderr.strip()})'
    assert not list((tmp_path / 'other').glob('*.kiln')), 'nothing was compiled'


def test_duplicate_manifest_line_counted_once(kiln, clean_env, tmp_path):
    # The same variant twice (in both spellings) is one module, compiled and counted once.
    twice = tmp_path / 'twice.txt'
    twice.write_text('per_token_group_quant in=bf16 group=32 out=int8\nper_token_group_quant-bf16-g32-int8-row\n'
                     'per_token_group_quant in=bf16 group=32 out=int8\n')
    report = warm(kiln, {**clean_env, 'KILN_CACHE_DIR': str(tmp_path / 'twice-cache')}, twice)
    assert report['modules'] == 3 and report['compiles'] == 3 and report['kept'] == 3, \
        f'a duplicate manifest line is counted once ({report})'


def test_missing_manifest_is_a_usage_error(kiln, clean_env, tmp_path):
    missing = run(kiln, {**clean_env, 'KILN_CACHE_DIR': str(tmp_path / 'cache')}, 'warm', '--variants',
                  str(tmp_path / 'absent.txt'))
    assert missing.returncode == 2, 'a manifest that does not exist is a usage error'
