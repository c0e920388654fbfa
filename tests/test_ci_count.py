#!/usr/bin/env python3
"""CI's counting, on reports written here (never the real build logs): .ci/count_results.py counts
good JUnit and testlog.json reports exactly, a missing one as one failure, and a truncated or
garbled one as one failure saying "counting failed" while the rest still count; and .ci/run, copied
into a scratch tree with a stand-in tools/test, ends with a well-formed "N passed, N failed,
N skipped" line and exit 1 when a report is malformed or the counter itself crashes.

Usage: test_ci_count.py SOURCE_ROOT
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from checks import check, exit_status

JUNIT = ('<?xml version="1.0" encoding="utf-8"?><testsuites>'
         '<testsuite name="pytest" tests="7" skipped="2" failures="1" errors="1"></testsuite></testsuites>')
JUNIT_FLAT = '<testsuite name="pytest" tests="3" skipped="0" failures="0" errors="0"></testsuite>'
TESTLOG = ''.join(f'{{"name": "t{i}", "result": "{result}"}}\n'
                  for i, result in enumerate(('OK', 'OK', 'EXPECTEDFAIL', 'SKIP', 'FAIL', 'TIMEOUT')))
BUILDS = ('build', 'build-asan', 'build-tsan', 'build-fuzz')


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def count(counter, tree, xml='pytest.xml', folders=BUILDS):
    done = subprocess.run([sys.executable, counter, str(tree / xml), *(str(tree / f) for f in folders)],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.strip(), done.stderr


def test_counter(counter, tmp):
    good = tmp / 'good'
    write(good / 'pytest.xml', JUNIT)
    write(good / 'flat.xml', JUNIT_FLAT)
    for folder in BUILDS:
        write(good / folder / 'meson-logs' / 'testlog.json', TESTLOG)
    status, out, err = count(counter, good)
    # 7 - 2 - 2 = 3 pytest passes and 3 per testlog (OK, OK, EXPECTEDFAIL) in each of 4 folders.
    check((status, out) == (0, '15 10 6'), f'good reports: 15 passed, 10 failed, 6 skipped (got {status} {out!r})', err)
    check(err == '', 'good reports: nothing on stderr', err)
    status, out, err = count(counter, good, xml='flat.xml', folders=BUILDS[:1])
    check((status, out) == (0, '6 2 1'), f'a bare <testsuite> root counts too (got {status} {out!r})', err)

    status, out, err = count(counter, good, xml='nothing.xml', folders=('build', 'build-gone'))
    check((status, out) == (0, '3 4 1'), f'missing report and testlog: one failure each (got {status} {out!r})', err)
    check('nothing.xml: missing' in err and 'build-gone/meson-logs/testlog.json: missing' in err,
          'each missing report is named', err)

    bad = tmp / 'bad'
    write(bad / 'pytest.xml', JUNIT[:len(JUNIT) // 2])
    write(bad / 'build' / 'meson-logs' / 'testlog.json',
          TESTLOG.splitlines()[0] + '\nnot json at all\n[1, 2]\n{"name": "no result"}\n' + TESTLOG.splitlines()[3] +
          '\n' + TESTLOG.splitlines()[1][:20])
    status, out, err = count(counter, bad, folders=('build',))
    # Kept: one OK and one SKIP; failures: the XML, the garbage line, the list, no result, the cut line.
    check((status, out) == (0, '1 5 1'), f'malformed reports: 1 passed, 5 failed, 1 skipped (got {status} {out!r})', err)
    check(err.count('counting failed: ') == 5, 'each unreadable report or line says "counting failed"', err)
    check('pytest.xml: ' in err and 'testlog.json:2: ' in err and 'testlog.json:6: ' in err,
          'the failures name the file and the line', err)
    write(bad / 'numbers.xml', '<testsuite tests="two" skipped="0" failures="0" errors="0"/>')
    write(bad / 'negative.xml', '<testsuite tests="1" skipped="0" failures="3" errors="0"/>')
    for xml in ('numbers.xml', 'negative.xml'):
        status, out, err = count(counter, bad, xml=xml, folders=())
        check((status, out) == (0, '0 1 0') and 'counting failed: ' in err, f'{xml}: one failure', f'{out!r} {err}')


def ci_tree(root, tmp, name, reports_of=None, tools_test_status=0, counter=None):
    """A copy of .ci/run and .ci/count_results.py (or `counter` in its place) whose tools/test
    copies in the reports written by `reports(tmp, reports_of)` and exits `tools_test_status`."""
    tree = tmp / name
    (tree / '.ci').mkdir(parents=True)
    shutil.copy(root / '.ci' / 'run', tree / '.ci' / 'run')
    if counter is None:
        shutil.copy(root / '.ci' / 'count_results.py', tree / '.ci' / 'count_results.py')
    else:
        write(tree / '.ci' / 'count_results.py', counter)
    write(tree / 'tools' / 'test', f'#!/usr/bin/env bash\ncp -r "{tmp}/{reports_of or name}-reports/." .\nexit {tools_test_status}\n')
    (tree / 'tools' / 'test').chmod(0o755)
    return tree


def reports(tmp, name, testlog=TESTLOG, junit=JUNIT_FLAT):
    where = tmp / f'{name}-reports'
    write(where / 'build-python' / 'pytest.xml', junit)
    for folder in BUILDS:
        write(where / folder / 'meson-logs' / 'testlog.json', testlog)


def ci_run(tree):
    env = {k: v for k, v in os.environ.items() if k not in ('KILN_BUILD_DIR', 'KILN_HARDENING_PREFIX')}
    done = subprocess.run(['bash', str(tree / '.ci' / 'run')], capture_output=True, text=True, env=env, timeout=60)
    lines = done.stdout.strip().splitlines()
    return done.returncode, lines[-1] if lines else '', done.stdout + done.stderr


def test_ci_run(root, tmp):
    passing = TESTLOG.replace('"FAIL"', '"OK"').replace('"TIMEOUT"', '"OK"')
    reports(tmp, 'pass', testlog=passing)
    status, last, out = ci_run(ci_tree(root, tmp, 'pass'))
    check((status, last) == (0, '23 passed, 0 failed, 4 skipped'), f'.ci/run, all good: exit 0 ({status}, {last!r})', out)

    status, last, out = ci_run(ci_tree(root, tmp, 'pass-but-tests-fail', reports_of='pass', tools_test_status=1))
    check(status == 1, f'.ci/run: tools/test failing fails CI even with every count good ({status}, {last!r})', out)

    reports(tmp, 'garbled', testlog=passing + '{"name": "cut', junit=JUNIT_FLAT[:30])
    status, last, out = ci_run(ci_tree(root, tmp, 'garbled'))
    check((status, last) == (1, '20 passed, 5 failed, 4 skipped'),
          f'.ci/run, truncated reports: exit 1, each counted as a failure ({status}, {last!r})', out)
    check('counting failed: ' in out, '.ci/run, truncated reports: says counting failed', out)

    reports(tmp, 'crash', testlog=passing)
    status, last, out = ci_run(ci_tree(root, tmp, 'crash', counter='raise SystemExit("counter crashed")\n'))
    check((status, last) == (1, '0 passed, 1 failed, 0 skipped'),
          f'.ci/run, counter crashed: exit 1 and a well-formed last line ({status}, {last!r})', out)
    check('counting failed: .ci/count_results.py exited 1' in out, '.ci/run names the counter that failed', out)

    reports(tmp, 'words', testlog=passing)
    status, last, out = ci_run(ci_tree(root, tmp, 'words', counter='print("many few none")\n'))
    check((status, last) == (1, '0 passed, 1 failed, 0 skipped') and "printed 'many few none'" in out,
          f'.ci/run, counter printed no numbers: counting failed, exit 1 ({status}, {last!r})', out)


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix='kiln-ci-count-'))
    try:
        test_counter(str(root / '.ci' / 'count_results.py'), tmp)
        test_ci_run(root, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
