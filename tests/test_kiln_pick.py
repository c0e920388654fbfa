#!/usr/bin/env python3
"""`kiln pick` as a user reads it: it never prints a grid that launch() would refuse, it refuses
such a shape with launch()'s error, and the numbers of its "why" line are the twin grid's own,
recomputed here from the README's formula (not from kiln's code).

Usage: test_kiln_pick.py KILN_EXECUTABLE
"""
import json
import os
import re
import subprocess
import sys
from checks import check, exit_status

GROUPS_PER_CTA = 16  # FP8_QUANT_HOPPER_GROUPS_PER_CTA
MAX_X, MAX_Y = 2**31 - 1, 65535


def pick(kiln, *args):
    # Why a fixed lever variable: `--twin auto` would read it; every call here names the lever.
    env = {**os.environ, 'KILN_FP8_ACT_QUANT_HOPPER': '1'}
    return subprocess.run([kiln, 'pick', *map(str, args)], capture_output=True, text=True, env=env, timeout=60)


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


def test_refusals(kiln):
    # The shared kernel cannot take 65536 groups on grid Y: no grid, launch()'s error.
    done = pick(kiln, '--m', 1, '--k', 8388608, '--twin', 'off')
    check(done.returncode != 0, f'--k 8388608 --twin off is refused (exit {done.returncode})', done.stdout)
    check('grid' not in done.stdout, '--k 8388608 --twin off prints no grid', done.stdout)
    check("'k'" in done.stderr and '65535' in done.stderr and 'grid Y' in done.stderr,
          '--k 8388608 --twin off names k and the grid-Y limit', done.stderr)
    # The twin takes it on its flat grid.
    done = pick(kiln, '--m', 1, '--k', 8388608, '--twin', 'on', '--json')
    check(done.returncode == 0, f'--k 8388608 --twin on runs the twin (exit {done.returncode})', done.stderr)
    if done.returncode == 0:
        out = json.loads(done.stdout)
        check(out['twin'] and out['grid'] == [4096, 1, 1], f'twin grid (4096, 1, 1): {out["grid"]}')
    # Shapes outside what a launch takes never reach a grid, whoever refuses them.
    for m, k in ((0, 7168), (5, 0), (4294967295, 128), (2147483648, 128)):
        done = pick(kiln, '--m', m, '--k', k, '--twin', 'on')
        check('grid' not in done.stdout, f'--m {m} --k {k}: no grid ({done.returncode})', done.stdout)


def test_limits(kiln):
    for lever in ('on', 'off'):
        for m in (1, MAX_X):
            for k in (128, 128 * 65535, 128 * 65536):
                done = pick(kiln, '--m', m, '--k', k, '--twin', lever, '--json')
                what = f'--m {m} --k {k} --twin {lever}'
                twin = lever == 'on' and twin_grid(m, k)[0][0] >= floor_of(132)
                if not twin and k // 128 > MAX_Y:
                    # The shared kernel past 65535 groups: refused, with launch()'s words.
                    check(done.returncode == 1, f'{what}: refused (exit {done.returncode})', done.stdout)
                    check("'k'" in done.stderr and '65535' in done.stderr, f'{what}: names the limit', done.stderr)
                    continue
                check(done.returncode == 0, f'{what}: exit 0 ({done.returncode})', done.stderr)
                if done.returncode != 0:
                    continue
                out = json.loads(done.stdout)
                x, y, z = out['grid']
                check(out['twin'] == twin, f'{what}: twin {twin}')
                check(1 <= x <= MAX_X and 1 <= y <= MAX_Y and z == 1, f'{what}: grid {out["grid"]} in limits')
                check(out['grid'] == (twin_grid(m, k)[0] if twin else [m, k // 128, 1]), f'{what}: the arm\'s grid')


def numbers(text):
    return [int(n) for n in re.findall(r'(?<![\d.])\d+(?![\d.])', text)]


def test_why_line(kiln):
    """Where the floor refuses the twin, the line's numbers are the refused grid's."""
    checked = 0
    for sm in (132, 148, 6146):
        floor = floor_of(sm)
        for k in (2048, 5120, 6144, 7168, 17408):
            min_m = min_m_of(k, sm)
            for m in sorted({1, 2, 7, 15, 16, 17, 21, 22, 25, 33, 34, 35, 44, 65, 66, 67, 1537, 3071, 3072, 3073}):
                done = pick(kiln, '--m', m, '--k', k, '--sm-count', sm, '--twin', 'on', '--json')
                what = f'sm {sm} k {k} m {m}'
                if done.returncode != 0:
                    check(False, f'{what}: exit 0', done.stderr)
                    continue
                out = json.loads(done.stdout)
                grid, groups_total = twin_grid(m, k)
                ctas = grid[0]
                check(out['twin_min_m'] == min_m, f'{what}: twin_min_m {out["twin_min_m"]} == {min_m}')
                check(out['twin'] == (ctas >= floor), f'{what}: twin iff {ctas} CTAs >= floor {floor}')
                check(out['twin'] == (m >= min_m), f'{what}: the twin iff M >= {min_m}')
                if out['twin']:
                    continue
                checked += 1
                why = out['why']
                check(why.startswith('too few CTAs to fill the device'), f'{what}: the floor reason', why)
                groups = [int(n) for n in re.findall(r'(\d+) K-groups', why)]
                check(groups == [groups_total], f'{what}: K-groups {groups} == {groups_total}', why)
                check(numbers(why) == [*grid, ctas, groups_total, GROUPS_PER_CTA, floor, sm, min_m],
                      f'{what}: grid, CTAs, groups, groups per CTA, floor, SMs, min M', why)
                # The plain-text line says the same.
                text = pick(kiln, '--m', m, '--k', k, '--sm-count', sm, '--twin', 'on').stdout
                check(f'why not the twin: {why}\n' in text, f'{what}: text and JSON agree', text)
    check(checked > 20, f'{checked} refusals checked')


def variant_pick(kiln, variant, m, k, *extra):
    done = pick(kiln, '--variant', variant, '--m', m, '--k', k, '--json', *extra)
    check(done.returncode == 0, f'--variant {variant} --m {m} --k {k}: exit 0 ({done.returncode})', done.stderr)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def test_variant_pick(kiln):
    """A family variant's pick, with grids recomputed from the README's rule: bf16 group 128 has 8
    lanes a group, 32 slots in a 256-thread CTA; int8 ships two groups a slot on the flat grid, so
    ceil(M * G / 64) CTAs, and its one-group kernel ceil(M * G / 32), taken while that is at most
    64 x SMs."""
    int8 = 'per_token_group_quant-bf16-g128-int8-row'
    for sm in (132, 16):
        for m, k in ((1, 7168), (16, 7168), (4825, 7168), (4826, 7168), (8192, 7168), (300, 2048)):
            groups = m * (k // 128)
            one_group_ctas = ceil_div(groups, 32)
            out = variant_pick(kiln, int8, m, k, '--sm-count', sm, '--one-group', 'on')
            what = f'{int8} sm {sm} m {m} k {k}'
            small = one_group_ctas <= 64 * sm
            check(out.get('one_group') == small, f'{what}: one group iff {one_group_ctas} CTAs <= {64 * sm}', out)
            expected = [one_group_ctas if small else ceil_div(groups, 64), 1, 1]
            check(out.get('grid') == expected, f'{what}: grid {out.get("grid")} == {expected}')
            check(out.get('kernel') == ('per_token_group_quant_one_group' if small else 'per_token_group_quant'),
                  f'{what}: kernel {out.get("kernel")}')
            check(numbers(out.get('why', ''))[-4:] == [one_group_ctas, 64 * sm, 64, sm],
                  f'{what}: the why line names the one-group grid and the ceiling', out.get('why'))
    out = variant_pick(kiln, int8, 16, 7168, '--one-group', 'off')
    check(not out.get('one_group') and out.get('grid') == [14, 1, 1] and 'chosen by the caller' in out.get('why', '')
          and 'KILN_Q_ONE_GROUP' not in out.get('why', ''),
          '--one-group off keeps the shipped kernel and says the caller chose it (not the variable)', out)
    # The variable's own words only when the variable decided.
    env = {**os.environ, 'KILN_Q_ONE_GROUP': '0'}
    done = subprocess.run([kiln, 'pick', '--variant', int8, '--m', '16', '--k', '7168', '--json'], capture_output=True,
                          text=True, env=env, timeout=60)
    out = json.loads(done.stdout) if done.returncode == 0 else {}
    check('KILN_Q_ONE_GROUP=0' in out.get('why', ''), 'KILN_Q_ONE_GROUP=0 with --one-group auto names the variable',
          f'{out} {done.stderr}')
    text = pick(kiln, '--variant', int8, '--m', 8192, '--k', 7168).stdout
    check('why not the one-group kernel: two groups per slot' in text, 'the text names why not the other', text)
    # A variant with one kernel, named by its parameters.
    out = variant_pick(kiln, 'per_token_group_quant in=fp16 group=64 scales=col', 16, 7168)
    check(out.get('variant') == 'per_token_group_quant-fp16-g64-e4m3-col' and not out.get('two_kernels'),
          'parameters name the variant; it has one kernel', out)
    check(out.get('why') == 'the variant ships one group per slot', 'its reason', out)
    # The seed's own variant keeps the seed's pick.
    seed = variant_pick(kiln, 'per_token_group_quant', 16, 7168, '--twin', 'on')
    plain = json.loads(pick(kiln, '--m', 16, '--k', 7168, '--twin', 'on', '--json').stdout)
    check(seed == plain, "the seed's variant: the seed's pick", seed)
    # What does not exist is refused, naming the argument.
    # An invalid option value is a usage error (exit 2), like every other command's.
    done = pick(kiln, '--variant', 'per_token_group_quant-bf16-g64-int8-row-ue8m0', '--m', 16, '--k', 7168)
    check(done.returncode == 2 and '--variant' in done.stderr and 'grid' not in done.stdout,
          'an impossible variant: exit 2, the option named, no grid', f'{done.returncode} {done.stderr}')
    done = pick(kiln, '--variant', 'per_token_group_quant group=48', '--m', 16, '--k', 7168)
    check(done.returncode == 2 and "'group'" in done.stderr and '32, 64, 128' in done.stderr,
          'a bad value names the parameter and the allowed values', f'{done.returncode} {done.stderr}')
    done = pick(kiln, '--variant', 'nonsense', '--m', 16, '--k', 7168)
    check(done.returncode == 2 and '--variant' in done.stderr and "'nonsense'" in done.stderr,
          '--variant nonsense: exit 2, naming the option and the value', f'{done.returncode} {done.stderr}')


def test_variant_groups(kiln):
    """--k follows the variant's group: a g32 or g64 variant takes any multiple of its group."""
    for variant, group in (('per_token_group_quant in=bf16 group=32 out=int8', 32),
                           ('per_token_group_quant in=bf16 group=64 out=int8', 64)):
        k = 3 * group  # 96 and 192: not multiples of 128
        out = variant_pick(kiln, variant, 16, k)
        check(out.get('k') == k and out.get('grid'), f'group {group}: --k {k} is taken', out)
        done = pick(kiln, '--variant', variant, '--m', 16, '--k', group + 16)
        check(done.returncode == 2 and '--k' in done.stderr and f'multiple of {group}' in done.stderr and
              f"'{group + 16}'" in done.stderr,
              f'group {group}: --k {group + 16} is a usage error naming the group', f'{done.returncode} {done.stderr}')
    done = pick(kiln, '--m', 16, '--k', 96)
    check(done.returncode == 2 and 'multiple of 128' in done.stderr, 'without --variant, --k stays a multiple of 128',
          f'{done.returncode} {done.stderr}')
    done = pick(kiln, '--variant', 'per_token_group_quant', '--m', 16, '--k', 96)
    check(done.returncode == 2 and 'multiple of 128' in done.stderr, "the seed's variant keeps the seed's 128",
          f'{done.returncode} {done.stderr}')


def test_variant_usage(kiln):
    done = pick(kiln, '--variant', 'per_token_group_quant in=bf16 in=fp16', '--m', 16, '--k', 7168)
    check(done.returncode == 2 and "'in'" in done.stderr and 'twice' in done.stderr and 'grid' not in done.stdout,
          'a parameter given twice is a usage error, not "last wins"', f'{done.returncode} {done.stderr}')
    done = pick(kiln, '--one-group', 'on', '--m', 16, '--k', 7168)
    check(done.returncode == 2 and '--one-group' in done.stderr and '--variant' in done.stderr,
          '--one-group without --variant is a usage error', f'{done.returncode} {done.stderr}')
    done = pick(kiln, '--variant', 'per_token_group_quant-bf16-g128-int8-row', '--one-group', 'maybe', '--m', 16,
                '--k', 7168)
    check(done.returncode == 2 and '--one-group' in done.stderr and 'on, off, auto' in done.stderr and
          "'maybe'" in done.stderr, '--one-group maybe: kiln\'s words, the choices and the value',
          f'{done.returncode} {done.stderr}')


def main():
    kiln = sys.argv[1]
    test_refusals(kiln)
    test_limits(kiln)
    test_why_line(kiln)
    test_variant_pick(kiln)
    test_variant_groups(kiln)
    test_variant_usage(kiln)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
