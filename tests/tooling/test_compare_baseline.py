"""bench/compare_baseline.py on a made-up kiln-bench report: --make-baseline writes a JSON and a
markdown file that keep the medians and the targets; --compare of a run whose twin and one variant
are 10% slower shows those ratios and the rest level, warns when one side used PDL, exits 1 under
--fail-over and 0 without it; input that is not a kiln-bench report exits 2 with a message; and the
committed baselines (bench/baselines) are under 200 KB and load."""
import copy
import json
import pathlib
import subprocess
import sys

import pytest

MS = (1, 16, 128, 2048, 8192, 32768)
VARIANTS = ('per_token_group_quant-bf16-g128-e4m3-row', 'per_token_group_quant-fp16-g64-int8-col-silu')


def report(slow=1.0, pdl=False):
    """A kiln-bench --json report with every table compare_baseline.py reads; `slow` scales the twin
    and the second variant's times."""
    arms = [{'m': m, 'k': 7168, 'shared_us': 3.0 + m / 100, 'twin_us': (2.5 + m / 400) * slow, 'twin_pdl_us': 1.9 + m / 400,
             'copy_us': 2.4 + m / 400, 'twin_of_ceiling': 0.9, 'pick': 'twin' if m > 16 else 'shared'} for m in (1, 16, 2048)]
    variant_rows = [{'variant': 'copy', 'k': 7168, 'points': [{'m': m, 'us': 2.0 + m / 200, 'of_ceiling': 0.95} for m in MS]}]
    for i, name in enumerate(VARIANTS):
        for k in (2048, 18432):
            variant_rows.append({'variant': name, 'k': k, 'points': [
                {'m': m, 'us': (2.0 + m * k / 4e6) * (slow if i == 1 else 1.0),
                 'of_ceiling': (0.95 if i == 0 else 0.92 / slow), 'one_group': m == 16} for m in MS]})
    decode = [{'kernel': 'empty', 'queued_us': 1.6, 'pdl_queued_us': 0.8, 'graph_us': 0.5, 'batch_us': 3.0},
              {'m': 1, 'k': 7168, 'pick': 'shared', 'pick_queued_us': 2.6, 'pick_pdl_queued_us': 1.7,
               'shared_graph_us': 1.2, 'shared_batch_us': 3.0}]
    title = 'variants: every variant' + ('; variants launched with PDL (KILN_PDL=1), the copies without' if pdl else '')
    return {
        'environment': {'gpu': 'NVIDIA H100 80GB HBM3', 'sm_count': 132, 'date': '2030-01-01T00:00:00Z', 'quick': False},
        'targets': [{'target': 'pick_with', 'measured': '7.00 ns', 'limit': '<= 10 ns', 'met': True, 'detail': {'ns': 7.0}},
                    {'target': 'twin, 2048 x 7168: fraction of the copy ceiling', 'measured': f'{78.9 / slow:.1f}%',
                     'limit': '>= 75%', 'met': 78.9 / slow >= 75, 'detail': {}}],
        'tables': {
            'ceiling': {'rows': [{'gbps': 3046.7, 'ms': 2.8}]},
            'arms': {'rows': arms},
            'floor': {'rows': [{'m': 16, 'k': 5120, 'twin_ctas': 40, 'shared_us': 3.2, 'twin_us': 3.1, 'pick': 'twin',
                                'agree': True}]},
            'decode': {'rows': decode},
            'host': {'rows': [{'name': 'pick_with_ns', 'value': 7.0, 'calls': 10}]},
            'launch': {'rows': [{'name': 'memory_hit_ns', 'value': 30.0}]},
            'variants': {'title': title, 'rows': variant_rows},
        },
    }


def run(root, *args):
    # Why no bytecode: the script imports merge_results.py, and a test leaves the source tree as it was.
    done = subprocess.run([sys.executable, '-B', str(root / 'bench' / 'compare_baseline.py'), *args],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope='module')
def tmp(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('baseline')
    (tmp / 'base.json').write_text(json.dumps(report()))
    # Why the merged form for the slow run: run_device.sh's JSON holds the report under "kiln".
    (tmp / 'slow.json').write_text(json.dumps({'environment': {}, 'kiln': report(slow=1.1)}))
    return tmp


@pytest.fixture(scope='module')
def baseline(source_root, tmp):
    """--make-baseline of the made-up report: (STEM.json, STEM.md, what it printed)."""
    status, out, err = run(source_root, '--make-baseline', str(tmp / 'base.json'), '--out', str(tmp / 'kind' / 'h100'),
                           '--note', 'made-up figures')
    assert status == 0, f'--make-baseline exits 0 ({status})\n{err}'
    return tmp / 'kind' / 'h100.json', tmp / 'kind' / 'h100.md', out


def test_baseline_json(baseline):
    base_json, base_md, out = baseline
    assert base_json.is_file() and base_md.is_file(), f'it writes STEM.json and STEM.md\n{out}'
    base = json.loads(base_json.read_text())
    assert base.get('format') == 'kiln-bench-baseline/1' and base.get('note') == 'made-up figures', \
        f'the JSON names its format and keeps the note\n{str(base)[:300]}'
    us = base.get('variants', {}).get('us', {})
    assert us.get(f'{VARIANTS[0]}@2048', [None])[0] == 2.001 and len(us) == 5, \
        f'variant medians are kept per (variant, K), cut to 4 significant digits\n{str(us)[:300]}'
    assert [t['target'] for t in base.get('targets', [])] == ['pick_with', 'twin, 2048 x 7168: fraction of the copy ceiling'] \
        and 'detail' not in base['targets'][0], f"the targets are kept without their details\n{base.get('targets')}"
    assert [r['row'] for r in base.get('decode', [])] == ['empty', '1x7168'] and base['decode'][1].get('graph') == 1.2, \
        f"decode rows: the empty kernel and the picked arm's columns\n{base.get('decode')}"


@pytest.mark.parametrize('needed', ['# kiln-bench baseline: NVIDIA H100 80GB HBM3', '| pick_with | 7.00 ns | <= 10 ns | yes |',
                                    '## Arms', '## Variants', 'made-up figures', 'at M*K >= 32M 8 of 8 reach 90%'])
def test_baseline_markdown(baseline, needed):
    md = baseline[1].read_text()
    assert needed in md, f'the markdown shows {needed!r}\n{md[:400]}'


def test_compare_slow_run(source_root, tmp, baseline):
    status, out, err = run(source_root, '--compare', str(tmp / 'slow.json'), str(baseline[0]))
    assert status == 0, f'--compare exits 0 without --fail-over ({status})\n{err}'
    lines = out.splitlines()
    arms_2048 = next((l for l in lines if l.split()[:2] == ['2048', '7168']), '')
    assert arms_2048.split()[2:4] == ['1.000', '1.100'], \
        f'the arms row shows shared level and the twin 1.100 ({arms_2048!r})\n{out}'
    assert 'twin: median 1.100' in out, f"and the twin's median ratio\n{out}"
    m16 = next((l for l in lines if l.startswith('M=16 ')), '').split()
    assert m16[1:2] == ['4'] and m16[3:5] == ['1.000', '1.100'], \
        f'variants per M: 4 points at M=16, 1.000 to 1.100 ({m16})\n{out}'
    assert 'baseline: 8 of 8 points at M*K >= 32M reach 90%' in out and \
        'run: 4 of 8 points at M*K >= 32M reach 90%' in out, \
        f"each side's points at 90% are counted (the slow variant falls below)\n{out}"
    assert f'{VARIANTS[1]}' in out and '1.100' in out and VARIANTS[0] not in out.split('moved most:')[-1], \
        f"the moved points are the slow variant's only\n{out}"
    assert '78.9% -> 71.7%  (yes -> no)' in out, f'targets side by side with their verdicts\n{out}'
    assert 'warning' not in out, f'no warning when both sides match\n{out}'


def test_fail_over(source_root, tmp, baseline):
    status, out, err = run(source_root, '--compare', str(tmp / 'slow.json'), str(baseline[0]), '--fail-over', '1.05')
    assert status == 1 and 'above --fail-over 1.05' in out and 'arms twin (1.100)' in out, \
        f'--fail-over 1.05: exit 1 naming the groups over it ({status})\n{out[-400:]}'
    status, out, err = run(source_root, '--compare', str(tmp / 'base.json'), str(baseline[0]), '--fail-over', '1.05')
    assert status == 0, f'a run equal to the baseline passes --fail-over ({status})\n{out[-400:]}'


def test_warnings(source_root, tmp, baseline):
    pdl_run = tmp / 'pdl.json'
    pdl_run.write_text(json.dumps(report(pdl=True)))
    status, out, err = run(source_root, '--compare', str(pdl_run), str(baseline[0]))
    assert status == 0 and 'warning: one side launched the variants with PDL' in out, \
        f'a PDL run against a run without: a warning\n{out[:600]}'
    other = copy.deepcopy(report())
    other['environment']['gpu'] = 'NVIDIA H200'
    (tmp / 'other.json').write_text(json.dumps(other))
    status, out, err = run(source_root, '--compare', str(tmp / 'other.json'), str(baseline[0]))
    assert 'different GPU kinds' in out, f'another GPU kind: a warning\n{out[:600]}'


@pytest.mark.parametrize('args, needed', [(['--compare', 'junk.json', 'BASE'], 'not a kiln-bench JSON report'),
                                          (['--compare', 'missing.json', 'BASE'], 'cannot read'),
                                          (['--make-baseline', 'base.json'], '--make-baseline needs --out STEM')],
                         ids=['junk', 'missing', 'no --out'])
def test_bad_input(source_root, tmp, baseline, args, needed):
    (tmp / 'junk.json').write_text('{"not": "a report"}')
    args = [str(baseline[0]) if a == 'BASE' else str(tmp / a) if a.endswith('.json') else a for a in args]
    status, out, err = run(source_root, *args)
    assert status == 2 and needed in err, f'{args[0]} {pathlib.Path(args[1]).name}: exit 2, says why ({status})\n{err}'


@pytest.mark.parametrize('kind', ['h100', 'h200'])
def test_committed_baseline(source_root, kind):
    path = source_root / 'bench' / 'baselines' / f'{kind}.json'
    size = path.stat().st_size if path.is_file() else 0
    assert 0 < size < 200 * 1024, f'bench/baselines/{kind}.json is there and under 200 KB ({size} bytes)'
    status, out, err = run(source_root, '--compare', str(path), str(path), '--fail-over', '1.0')
    assert status == 0 and 'median 1.000' in out, f'{kind}: the baseline against itself is level ({status})\n{err}'
