#!/usr/bin/env python3
"""bench/compare_baseline.py on a made-up kiln-bench report: --make-baseline writes a JSON and a
markdown file that keep the medians and the targets; --compare of a run whose twin and one variant
are 10% slower shows those ratios and the rest level, warns when one side used PDL, exits 1 under
--fail-over and 0 without it; input that is not a kiln-bench report exits 2 with a message; and the
committed baselines (bench/baselines) are under 200 KB and load.

Usage: test_compare_baseline.py SOURCE_ROOT
"""
import copy
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

from checks import check, exit_status

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


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    tmp = pathlib.Path(tempfile.mkdtemp())
    try:
        base_run, slow_run = tmp / 'base.json', tmp / 'slow.json'
        base_run.write_text(json.dumps(report()))
        # Why the merged form for the slow run: run_device.sh's JSON holds the report under "kiln".
        slow_run.write_text(json.dumps({'environment': {}, 'kiln': report(slow=1.1)}))
        status, out, err = run(root, '--make-baseline', str(base_run), '--out', str(tmp / 'kind' / 'h100'),
                               '--note', 'made-up figures')
        check(status == 0, f'--make-baseline exits 0 ({status})', err)
        base_json, base_md = tmp / 'kind' / 'h100.json', tmp / 'kind' / 'h100.md'
        check(base_json.is_file() and base_md.is_file(), 'it writes STEM.json and STEM.md', out)
        base = json.loads(base_json.read_text()) if base_json.is_file() else {}
        check(base.get('format') == 'kiln-bench-baseline/1' and base.get('note') == 'made-up figures',
              'the JSON names its format and keeps the note', str(base)[:300])
        us = base.get('variants', {}).get('us', {})
        check(us.get(f'{VARIANTS[0]}@2048', [None])[0] == 2.001 and len(us) == 5,
              'variant medians are kept per (variant, K), cut to 4 significant digits', str(us)[:300])
        check([t['target'] for t in base.get('targets', [])] == ['pick_with', 'twin, 2048 x 7168: fraction of the copy ceiling']
              and 'detail' not in base['targets'][0], 'the targets are kept without their details', str(base.get('targets')))
        check([r['row'] for r in base.get('decode', [])] == ['empty', '1x7168'] and base['decode'][1].get('graph') == 1.2,
              'decode rows: the empty kernel and the picked arm\'s columns', str(base.get('decode')))
        md = base_md.read_text() if base_md.is_file() else ''
        for needed in ('# kiln-bench baseline: NVIDIA H100 80GB HBM3', '| pick_with | 7.00 ns | <= 10 ns | yes |',
                       '## Arms', '## Variants', 'made-up figures', 'at M*K >= 32M 8 of 8 reach 90%'):
            check(needed in md, f'the markdown shows {needed!r}', md[:400])

        status, out, err = run(root, '--compare', str(slow_run), str(base_json))
        check(status == 0, f'--compare exits 0 without --fail-over ({status})', err)
        lines = out.splitlines()
        arms_2048 = next((l for l in lines if l.split()[:2] == ['2048', '7168']), '')
        check(arms_2048.split()[2:4] == ['1.000', '1.100'], f'the arms row shows shared level and the twin 1.100 ({arms_2048!r})', out)
        check('twin: median 1.100' in out, 'and the twin\'s median ratio', out)
        m16 = next((l for l in lines if l.startswith('M=16 ')), '').split()
        check(m16[1:2] == ['4'] and m16[3:5] == ['1.000', '1.100'], f'variants per M: 4 points at M=16, 1.000 to 1.100 ({m16})', out)
        check('baseline: 8 of 8 points at M*K >= 32M reach 90%' in out and 'run: 4 of 8 points at M*K >= 32M reach 90%' in out,
              'each side\'s points at 90% are counted (the slow variant falls below)', out)
        check(f'{VARIANTS[1]}' in out and '1.100' in out and VARIANTS[0] not in out.split('moved most:')[-1],
              'the moved points are the slow variant\'s only', out)
        check('78.9% -> 71.7%  (yes -> no)' in out, 'targets side by side with their verdicts', out)
        check('warning' not in out, 'no warning when both sides match', out)

        status, out, err = run(root, '--compare', str(slow_run), str(base_json), '--fail-over', '1.05')
        check(status == 1 and 'above --fail-over 1.05' in out and 'arms twin (1.100)' in out,
              f'--fail-over 1.05: exit 1 naming the groups over it ({status})', out[-400:])
        status, out, err = run(root, '--compare', str(base_run), str(base_json), '--fail-over', '1.05')
        check(status == 0, f'a run equal to the baseline passes --fail-over ({status})', out[-400:])

        pdl_run = tmp / 'pdl.json'
        pdl_run.write_text(json.dumps(report(pdl=True)))
        status, out, err = run(root, '--compare', str(pdl_run), str(base_json))
        check(status == 0 and 'warning: one side launched the variants with PDL' in out, 'a PDL run against a run without: a warning', out[:600])
        other = copy.deepcopy(report())
        other['environment']['gpu'] = 'NVIDIA H200'
        (tmp / 'other.json').write_text(json.dumps(other))
        status, out, err = run(root, '--compare', str(tmp / 'other.json'), str(base_json))
        check('different GPU kinds' in out, 'another GPU kind: a warning', out[:600])

        (tmp / 'junk.json').write_text('{"not": "a report"}')
        for args, needed in ((['--compare', str(tmp / 'junk.json'), str(base_json)], "not a kiln-bench JSON report"),
                             (['--compare', str(tmp / 'missing.json'), str(base_json)], 'cannot read'),
                             (['--make-baseline', str(base_run)], '--make-baseline needs --out STEM')):
            status, out, err = run(root, *args)
            check(status == 2 and needed in err, f'{args[0]} {pathlib.Path(args[1]).name}: exit 2, says why ({status})', err)

        for kind in ('h100', 'h200'):
            path = root / 'bench' / 'baselines' / f'{kind}.json'
            size = path.stat().st_size if path.is_file() else 0
            check(0 < size < 200 * 1024, f'bench/baselines/{kind}.json is there and under 200 KB ({size} bytes)')
            if size:
                status, out, err = run(root, '--compare', str(path), str(path), '--fail-over', '1.0')
                check(status == 0 and 'median 1.000' in out, f'{kind}: the baseline against itself is level ({status})', err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
