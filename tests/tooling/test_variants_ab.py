"""bench/variants_ab.py on made-up kiln-bench logs: a change that makes two variants 10% faster in
every round but one (whose outlier the median must drop), with the rest level, gives those figures
per group; each build's points below 90% at M*K >= 32M are listed; a log without a variants table
and a --changed expression that matches nothing exit non-zero with a message."""
import subprocess
import sys

import pytest

MS = (1, 16, 128, 2048, 8192, 32768)
VARIANTS = ('per_token_group_quant-fp16-g64-e4m3-col-silu', 'per_token_group_quant-fp16-g128-e4m3-col-silu',
            'per_token_group_quant-bf16-g128-e4m3-row', 'per_token_group_quant-bf16-g32-int8-col')
CHANGED = '-fp16-g(64|128)-e4m3-col-silu$'
BIG, SMALL = ('M*K', '>=', 'big'), ('M*K', '<', 'big')


def log_text(scale_of, percent_of):
    """A kiln-bench log: some other table, then the variants table with every variant at K 2048 and 18432."""
    lines = ['== arms: not this table', 'M  K  us', '1  2048  3.00 (1%)',
             '== variants: every variant of the quantizer family, median us per launch',
             'variant' + ' ' * 50 + 'K      ' + '  '.join(f'M={m}' for m in MS),
             'copy of 3MK bytes' + ' ' * 40 + '2048   ' + '  '.join('9.00 (50%)' for _ in MS)]
    for variant in VARIANTS:
        for k in (2048, 18432):
            cells = '  '.join(f'{10.0 * scale_of(variant, m) + m * k / 1e6:.2f} ({percent_of(variant, k, m)}%)' for m in MS)
            lines.append(f'{variant:57}{k:<7}{cells}')
    lines += ['== targets', 'target  measured']
    return '\n'.join(lines) + '\n'


def run(root, *args):
    done = subprocess.run([sys.executable, str(root / 'bench' / 'variants_ab.py'), *args],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope='module')
def logs(tmp_path_factory):
    """Three rounds of each build: the old build level, the new one 0.9x on the changed variants in
    two rounds and 5x in the third. The old build misses 90% at one big point of a changed variant;
    the new one at one of the control."""
    tmp = tmp_path_factory.mktemp('variants-ab')
    old_pct = lambda v, k, m: 89 if (v == VARIANTS[0] and k == 18432 and m == 2048) else 95
    new_pct = lambda v, k, m: 88 if (v == VARIANTS[3] and k == 18432 and m == 8192) else 97
    faster = lambda variant, m: 0.9 if variant in VARIANTS[:2] else 1.0
    outlier = lambda variant, m: 5.0 if variant in VARIANTS[:2] else 1.0
    old = [tmp / f'old-{r}.log' for r in range(3)]
    new = [tmp / f'new-{r}.log' for r in range(3)]
    for path in old:
        path.write_text(log_text(lambda variant, m: 1.0, old_pct))
    for path, scale in zip(new, (faster, faster, outlier)):
        path.write_text(log_text(scale, new_pct))
    (tmp / 'empty.log').write_text('== arms\nnothing else\n')
    return tmp, old, new


@pytest.fixture(scope='module')
def compared(source_root, logs):
    _, old, new = logs
    status, out, err = run(source_root, '--old', *map(str, old), '--new', *map(str, new), f'--changed={CHANGED}')
    assert status == 0, f'two builds of three rounds: exit 0 (got {status})\n{err}'
    rows = {tuple(line.split()[:4]): line.split()[4:] for line in out.splitlines()
            if line.startswith(('changed', 'control'))}
    return out, rows


def test_point_counts(compared):
    out, rows = compared
    # M*K >= 32M among M in MS and K in (2048, 18432): 32768 x 2048, 2048/8192/32768 x 18432.
    assert rows.get(('changed',) + BIG, [None])[0] == '8', f'changed, big shapes: 2 variants x 4 points\n{out}'
    assert rows.get(('changed',) + SMALL, [None])[0] == '16', f'changed, small shapes: 2 variants x 8 points\n{out}'


@pytest.mark.parametrize('group', [('changed',) + BIG, ('changed',) + SMALL], ids=' '.join)
def test_median_drops_the_outlier(compared, group):
    out, rows = compared
    ratios = rows.get(group, [None] * 4)[1:]
    # Each point's time is 10 x scale + M*K/1e6, so 0.9 in two rounds of three is a ratio below 1 but not 5x.
    assert all(r is not None and 0.8 < float(r) < 1.0 for r in ratios), \
        f'{" ".join(group)}: the median drops the outlier round ({ratios})\n{out}'


@pytest.mark.parametrize('group', [('control',) + BIG, ('control',) + SMALL], ids=' '.join)
def test_control_is_level(compared, group):
    out, rows = compared
    assert rows.get(group, [None] * 4)[1:] == ['1.0000', '1.000', '1.000'], f'{" ".join(group)}: level\n{out}'


def test_header_and_misses(compared):
    out, _ = compared
    assert 'median' in out and 'medians over 3 and 3 rounds' in out, f'the header says how many rounds\n{out}'
    assert 'old: 1 points below 90% at M*K >= big' in out and f"('{VARIANTS[0]}', 18432, 2048)" in out, \
        f"the old build's miss is listed\n{out}"
    assert 'new: 1 points below 90% at M*K >= big' in out and f"('{VARIANTS[3]}', 18432, 8192)" in out, \
        f"the new build's miss is listed\n{out}"
    assert out.count('K=') == 8 and '89.0% ->  97.0%' in out, f"the changed variants' big points, one per line\n{out}"


def test_log_without_the_table(source_root, logs):
    tmp, _, new = logs
    status, out, err = run(source_root, '--old', str(tmp / 'empty.log'), '--new', str(new[0]), f'--changed={CHANGED}')
    assert status != 0 and "no '== variants' table in" in err and 'empty.log' in err, \
        f'a log without the table: non-zero and named (got {status})\n{out + err}'


def test_changed_matches_nothing(source_root, logs):
    _, old, new = logs
    status, out, err = run(source_root, '--old', str(old[0]), '--new', str(new[0]), '--changed=-nothing-like-this$')
    assert status != 0 and 'no variant matches --changed' in err, \
        f'an expression that matches no variant: non-zero and said (got {status})\n{out + err}'
