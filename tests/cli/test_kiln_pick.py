"""`kiln pick` as a user reads it: it never prints a grid that launch() would refuse, it refuses
such a shape with launch()'s error, and the numbers of its "why" line are the twin grid's own,
recomputed here from the documented formulas (not from kiln's code). `--seed` explains the seed
quantizer (kiln_fp8_act_quant); without it, the one pick of kiln_quant for every variant."""
import itertools
import json
import os
import re
import subprocess

import pytest

GROUPS_PER_CTA = 16  # FP8_QUANT_HOPPER_GROUPS_PER_CTA
MAX_X, MAX_Y = 2**31 - 1, 65535


def pick(kiln, *args):
    # Why a fixed lever variable: `--twin auto` would read it; every call here names the lever.
    env = {**os.environ, 'KILN_FP8_ACT_QUANT_HOPPER': '1'}
    return subprocess.run([kiln, 'pick', *map(str, args)], capture_output=True, text=True, env=env, timeout=60)


def seed_pick(kiln, *args):
    return pick(kiln, '--seed', *args)


def ceil_div(a, b):
    return -(-a // b)


def twin_grid(m, k):
    """README: (min(ceil(M * L / 16), 2^31 - 1), 1, 1) and the M * L groups it covers."""
    groups = m * (k // 128)
    return [min(ceil_div(groups, GROUPS_PER_CTA), MAX_X), 1, 1], groups


def floor_of(sm):
    return ceil_div(3 * sm, 10)  # ceil(0.3 x sm), in integers


def min_m_of(k, sm):
    """The smallest M whose twin grid reaches the floor F, from the grid rule alone:
    ceil(M * L / 16) >= F  <=>  M * L > 16 * (F - 1)  <=>  M >= 16 * (F - 1) // L + 1."""
    return GROUPS_PER_CTA * (floor_of(sm) - 1) // (k // 128) + 1


def numbers(text):
    return [int(n) for n in re.findall(r'(?<![\d.])\d+(?![\d.])', text)]


def test_shared_kernel_refuses_65536_groups(kiln):
    # The shared kernel cannot take 65536 groups on grid Y: no grid, launch()'s error.
    done = seed_pick(kiln, '--m', 1, '--k', 8388608, '--twin', 'off')
    assert done.returncode != 0, f'--k 8388608 --twin off is refused (exit {done.returncode})\n{done.stdout}'
    assert 'grid' not in done.stdout, f'--k 8388608 --twin off prints no grid\n{done.stdout}'
    assert "'k'" in done.stderr and '65535' in done.stderr and 'grid Y' in done.stderr, \
        f'--k 8388608 --twin off names k and the grid-Y limit\n{done.stderr}'


def test_twin_takes_65536_groups(kiln):
    # The twin takes it on its flat grid.
    done = seed_pick(kiln, '--m', 1, '--k', 8388608, '--twin', 'on', '--json')
    assert done.returncode == 0, f'--k 8388608 --twin on runs the twin (exit {done.returncode})\n{done.stderr}'
    out = json.loads(done.stdout)
    assert out['twin'] and out['grid'] == [4096, 1, 1], f'twin grid (4096, 1, 1): {out["grid"]}'


@pytest.mark.parametrize('m, k', [(0, 7168), (5, 0), (4294967295, 128), (2147483648, 128)])
def test_shape_outside_a_launch_gets_no_grid(kiln, m, k):
    # Shapes outside what a launch takes never reach a grid, whoever refuses them.
    done = seed_pick(kiln, '--m', m, '--k', k, '--twin', 'on')
    assert 'grid' not in done.stdout, f'--m {m} --k {k}: no grid ({done.returncode})\n{done.stdout}'


@pytest.mark.parametrize('lever, m, k', itertools.product(('on', 'off'), (1, MAX_X), (128, 128 * 65535, 128 * 65536)))
def test_limits(kiln, lever, m, k):
    done = seed_pick(kiln, '--m', m, '--k', k, '--twin', lever, '--json')
    what = f'--m {m} --k {k} --twin {lever}'
    twin = lever == 'on' and twin_grid(m, k)[0][0] >= floor_of(132)
    if not twin and k // 128 > MAX_Y:
        # The shared kernel past 65535 groups: refused, with launch()'s words.
        assert done.returncode == 1, f'{what}: refused (exit {done.returncode})\n{done.stdout}'
        assert "'k'" in done.stderr and '65535' in done.stderr, f'{what}: names the limit\n{done.stderr}'
        return
    assert done.returncode == 0, f'{what}: exit 0 ({done.returncode})\n{done.stderr}'
    out = json.loads(done.stdout)
    x, y, z = out['grid']
    assert out['twin'] == twin, f'{what}: twin {twin}'
    assert 1 <= x <= MAX_X and 1 <= y <= MAX_Y and z == 1, f'{what}: grid {out["grid"]} in limits'
    assert out['grid'] == (twin_grid(m, k)[0] if twin else [m, k // 128, 1]), f"{what}: the arm's grid"


WHY_SMS = (132, 148, 6146)
WHY_KS = (2048, 5120, 6144, 7168, 17408)
WHY_MS = (1, 2, 7, 15, 16, 17, 21, 22, 25, 33, 34, 35, 44, 65, 66, 67, 1537, 3071, 3072, 3073)
WHY_CASES = list(itertools.product(WHY_SMS, WHY_KS, WHY_MS))


def test_why_cases_include_refusals():
    # The why line is checked only where the floor refuses the twin: enough of the cases must.
    refused = sum(1 for sm, k, m in WHY_CASES if m < min_m_of(k, sm))
    assert refused > 20, f'{refused} refusals among the cases'


@pytest.mark.parametrize('sm, k, m', WHY_CASES)
def test_why_line(kiln, sm, k, m):
    """Where the floor refuses the twin, the line's numbers are the refused grid's."""
    floor, min_m = floor_of(sm), min_m_of(k, sm)
    done = seed_pick(kiln, '--m', m, '--k', k, '--sm-count', sm, '--twin', 'on', '--json')
    assert done.returncode == 0, f'exit 0\n{done.stderr}'
    out = json.loads(done.stdout)
    grid, groups_total = twin_grid(m, k)
    ctas = grid[0]
    assert out['twin_min_m'] == min_m, f'twin_min_m {out["twin_min_m"]} == {min_m}'
    assert out['twin'] == (ctas >= floor), f'twin iff {ctas} CTAs >= floor {floor}'
    assert out['twin'] == (m >= min_m), f'the twin iff M >= {min_m}'
    if out['twin']:
        return
    why = out['why']
    assert why.startswith('too few CTAs to fill the device'), f'the floor reason: {why}'
    groups = [int(n) for n in re.findall(r'(\d+) K-groups', why)]
    assert groups == [groups_total], f'K-groups {groups} == {groups_total}: {why}'
    assert numbers(why) == [*grid, ctas, groups_total, GROUPS_PER_CTA, floor, sm, min_m], \
        f'grid, CTAs, groups, groups per CTA, floor, SMs, min M: {why}'
    # The plain-text line says the same.
    text = seed_pick(kiln, '--m', m, '--k', k, '--sm-count', sm, '--twin', 'on').stdout
    assert f'why not the twin: {why}\n' in text, f'text and JSON agree\n{text}'


def variant_pick(kiln, variant, m, k, *extra):
    done = pick(kiln, '--variant', variant, '--m', m, '--k', k, '--json', *extra)
    assert done.returncode == 0, f'--variant {variant} --m {m} --k {k}: exit 0 ({done.returncode})\n{done.stderr}'
    return json.loads(done.stdout)


INT8 = 'per_token_group_quant-bf16-g128-int8-row'


@pytest.mark.parametrize('sm, shape', itertools.product(
    (132, 16), ((1, 7168), (16, 7168), (4825, 7168), (4826, 7168), (8192, 7168), (300, 2048))))
def test_int8_variant_grid(kiln, sm, shape):
    """A family variant's pick, with grids recomputed from the README's rule: bf16 group 128 has 8
    lanes a group, 32 slots in a 256-thread CTA; int8 ships two groups a slot on the flat grid, so
    ceil(M * G / 64) CTAs, and its one-group kernel ceil(M * G / 32), taken while that is at most
    64 x SMs."""
    m, k = shape
    groups = m * (k // 128)
    one_group_ctas = ceil_div(groups, 32)
    out = variant_pick(kiln, INT8, m, k, '--sm-count', sm, '--one-group', 'on')
    small = one_group_ctas <= 64 * sm
    expected = [one_group_ctas if small else ceil_div(groups, 64), 1, 1]
    assert out.get('grid') == expected, f'grid {out.get("grid")} == {expected}'
    assert out.get('entry') == ('per_token_group_quant_one_group' if small else 'per_token_group_quant'), \
        f'one group iff {one_group_ctas} CTAs <= {64 * sm}: {out}'
    assert out.get('kernel') == ('family (one group per slot)' if small else 'family (two groups per slot)'), out
    assert numbers(out.get('why', ''))[-4:] == [one_group_ctas, 64 * sm, 64, sm], \
        f'the why line names the one-group grid and the ceiling: {out.get("why")}'


def test_one_group_off_is_the_callers_choice(kiln):
    out = variant_pick(kiln, INT8, 16, 7168, '--one-group', 'off')
    assert out.get('entry') == 'per_token_group_quant' and out.get('grid') == [14, 1, 1] and \
        'chosen by the caller' in out.get('why', '') and 'KILN_Q_ONE_GROUP' not in out.get('why', ''), \
        f'--one-group off keeps the shipped kernel and says the caller chose it (not the variable): {out}'


def test_one_group_variable_named_when_it_decided(kiln):
    done = subprocess.run([kiln, 'pick', '--variant', INT8, '--m', '16', '--k', '7168', '--json'], capture_output=True,
                          text=True, env={**os.environ, 'KILN_Q_ONE_GROUP': '0'}, timeout=60)
    out = json.loads(done.stdout) if done.returncode == 0 else {}
    assert 'KILN_Q_ONE_GROUP=0' in out.get('why', ''), \
        f'KILN_Q_ONE_GROUP=0 with --one-group auto names the variable: {out} {done.stderr}'
    text = pick(kiln, '--variant', INT8, '--m', 8192, '--k', 7168).stdout
    assert re.search(r'not family \(one group per slot\): +two groups per slot', text), \
        f'the text names why not the other\n{text}'


def test_variant_named_by_parameters(kiln):
    # A variant with one kernel, named by its parameters.
    out = variant_pick(kiln, 'per_token_group_quant in=fp16 group=64 scales=col', 16, 7168)
    assert out.get('variant') == 'per_token_group_quant-fp16-g64-e4m3-col', f'parameters name the variant: {out}'
    in_variant = [c['in_variant'] for c in out['candidates']]
    assert in_variant == [False, False, False, True], f'it has one kernel: {out}'
    assert out.get('why') == "the variant's only kernel for this call", f'its reason: {out}'
    assert out['candidates'][2]['why'] == 'the variant ships one group per slot', f'why not two groups: {out}'


def test_default_variant_one_pick(kiln):
    # sm_90a: the twin where its grid fills the device; below the floor the device's rule, which on
    # every published GPU prefers the family kernel.
    out = variant_pick(kiln, 'per_token_group_quant', 4096, 7168, '--twin', 'on', '--arch', 'sm_90a')
    assert out['kernel'] == 'twin' and out['entry'] == 'per_token_group_quant_fp8_hopper', out
    assert out['grid'] == twin_grid(4096, 7168)[0] and out['block'] == [128, 1, 1], out
    plain = json.loads(pick(kiln, '--m', 4096, '--k', 7168, '--twin', 'on', '--arch', 'sm_90a', '--json').stdout)
    assert plain == out, 'without --variant: the default variant'
    # Below the twin's floor, on any target, the shared kernel: its CTAs start in about one wave there.
    for arch in ('sm_90a', 'compute_80'):
        small = variant_pick(kiln, 'per_token_group_quant', 1, 7168, '--twin', 'on', '--arch', arch)
        assert small['kernel'] == 'shared' and small['block'] == [128, 1, 1] and small['grid'] == [1, 56, 1], small
        assert small['why'].startswith("the shared kernel's grid is within 12 CTAs per SM"), small
        assert '(shared grid 56 CTAs, ceiling 1584 = 12 x 132 SMs)' in small['why'], small
        assert small['candidates'][3]['why'] == small['why'], small
    # Without the twin the shared kernel keeps grids up to 12 CTAs per SM: 28 x 56 = 1568, 29 x 56 = 1624.
    assert variant_pick(kiln, 'per_token_group_quant', 28, 7168, '--arch', 'compute_80')['kernel'] == 'shared'
    assert variant_pick(kiln, 'per_token_group_quant', 29, 7168, '--arch', 'compute_80')['kernel'] == 'family (one group per slot)'
    twin_why = variant_pick(kiln, 'per_token_group_quant', 1, 7168, '--twin', 'on', '--arch', 'sm_90a')
    assert twin_why['candidates'][0]['why'].startswith("the twin's grid is below the CTA floor"), twin_why
    large = variant_pick(kiln, 'per_token_group_quant', 4096, 7168, '--arch', 'compute_80')
    assert 'too slowly for its memory' in large['why'] and '0.13x' in large['why'], large
    # A target without the hopper family: the twin is absent, whatever the lever says.
    for gpu in ('a100', 'l40s', 'rtx4090', 'h100', 'h200', 'b200', 'rtx5090', 'gb10'):
        out = variant_pick(kiln, 'per_token_group_quant', 4096, 7168, '--twin', 'on', '--arch', 'compute_80',
                           '--gpu', gpu)
        assert out['kernel'] == 'family (one group per slot)' and not out['prefers_shared'], out
        assert out['candidates'][0]['why'].startswith("not in this device's image"), out
        assert out['candidates'][1]['why'].startswith('this device starts CTAs too slowly'), out
    # A call outside the seed kernels (k/128 > 65535): the family kernel, never a refusal.
    out = variant_pick(kiln, 'per_token_group_quant', 1, 8388608, '--twin', 'off')
    assert out['kernel'] == 'family (one group per slot)', out
    assert out['candidates'][1]['why'].startswith('the call is outside the seed kernels'), out
    # The text names the kernel, its grid and each other candidate.
    text = pick(kiln, '--m', 1, '--k', 7168, '--arch', 'sm_90a', '--twin', 'on').stdout
    assert 'kernel: per_token_group_quant_fp8 (shared)' in text and 'not twin:' in text, text
    done = pick(kiln, '--m', 1, '--k', 7168, '--gpu', 'v100')
    assert done.returncode == 2 and '--gpu' in done.stderr and 'a100' in done.stderr, done.stderr
    done = pick(kiln, '--m', 1, '--k', 7168, '--arch', 'sm_1')
    assert done.returncode == 2 and '--arch' in done.stderr, done.stderr


def test_refused_variants(kiln):
    # What does not exist is refused, naming the argument; an invalid option value is a usage
    # error (exit 2), like every other command's.
    done = pick(kiln, '--variant', 'per_token_group_quant-bf16-g64-int8-row-ue8m0', '--m', 16, '--k', 7168)
    assert done.returncode == 2 and '--variant' in done.stderr and 'grid' not in done.stdout, \
        f'an impossible variant: exit 2, the option named, no grid: {done.returncode} {done.stderr}'
    done = pick(kiln, '--variant', 'per_token_group_quant group=48', '--m', 16, '--k', 7168)
    assert done.returncode == 2 and "'group'" in done.stderr and '32, 64, 128' in done.stderr, \
        f'a bad value names the parameter and the allowed values: {done.returncode} {done.stderr}'
    done = pick(kiln, '--variant', 'nonsense', '--m', 16, '--k', 7168)
    assert done.returncode == 2 and '--variant' in done.stderr and "'nonsense'" in done.stderr, \
        f'--variant nonsense: exit 2, naming the option and the value: {done.returncode} {done.stderr}'


@pytest.mark.parametrize('variant, group', [('per_token_group_quant in=bf16 group=32 out=int8', 32),
                                            ('per_token_group_quant in=bf16 group=64 out=int8', 64)])
def test_k_follows_the_variant_group(kiln, variant, group):
    """--k follows the variant's group: a g32 or g64 variant takes any multiple of its group."""
    k = 3 * group  # 96 and 192: not multiples of 128
    out = variant_pick(kiln, variant, 16, k)
    assert out.get('k') == k and out.get('grid'), f'group {group}: --k {k} is taken: {out}'
    done = pick(kiln, '--variant', variant, '--m', 16, '--k', group + 16)
    assert done.returncode == 2 and '--k' in done.stderr and f'multiple of {group}' in done.stderr and \
        f"'{group + 16}'" in done.stderr, \
        f'group {group}: --k {group + 16} is a usage error naming the group: {done.returncode} {done.stderr}'


def test_k_stays_a_multiple_of_128(kiln):
    done = pick(kiln, '--m', 16, '--k', 96)
    assert done.returncode == 2 and 'multiple of 128' in done.stderr, \
        f'without --variant, --k stays a multiple of 128: {done.returncode} {done.stderr}'
    done = pick(kiln, '--variant', 'per_token_group_quant', '--m', 16, '--k', 96)
    assert done.returncode == 2 and 'multiple of 128' in done.stderr, \
        f"the seed's variant keeps the seed's 128: {done.returncode} {done.stderr}"


def test_variant_usage(kiln):
    done = pick(kiln, '--variant', 'per_token_group_quant in=bf16 in=fp16', '--m', 16, '--k', 7168)
    assert done.returncode == 2 and "'in'" in done.stderr and 'twice' in done.stderr and 'grid' not in done.stdout, \
        f'a parameter given twice is a usage error, not "last wins": {done.returncode} {done.stderr}'
    done = pick(kiln, '--seed', '--variant', INT8, '--m', 16, '--k', 7168)
    assert done.returncode == 2 and '--seed' in done.stderr and '--variant' in done.stderr, \
        f'--seed with --variant is a usage error: {done.returncode} {done.stderr}'
    done = pick(kiln, '--variant', INT8, '--one-group', 'maybe', '--m', 16, '--k', 7168)
    assert done.returncode == 2 and '--one-group' in done.stderr and 'on, off, auto' in done.stderr and \
        "'maybe'" in done.stderr, f"--one-group maybe: kiln's words, the choices and the value: " \
                                  f'{done.returncode} {done.stderr}'
