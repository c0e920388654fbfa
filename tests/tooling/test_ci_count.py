"""CI's counting, on reports written here (never the real build logs): .ci/count_results.py counts
good JUnit and testlog.json reports exactly, a missing one as one failure, and a truncated or
garbled one as one failure saying "counting failed" while the rest still count; and .ci/run, copied
into a scratch tree with a stand-in tools/test, ends with a well-formed "N passed, N failed,
N skipped" line and exit 1 when a report is malformed or the counter itself crashes."""
import os
import shutil
import subprocess
import sys

import pytest

JUNIT = ('<?xml version="1.0" encoding="utf-8"?><testsuites>'
         '<testsuite name="pytest" tests="7" skipped="2" failures="1" errors="1"></testsuite></testsuites>')
JUNIT_FLAT = '<testsuite name="pytest" tests="3" skipped="0" failures="0" errors="0"></testsuite>'
TESTLOG = ''.join(f'{{"name": "t{i}", "result": "{result}"}}\n'
                  for i, result in enumerate(('OK', 'OK', 'EXPECTEDFAIL', 'SKIP', 'FAIL', 'TIMEOUT')))
PASSING = TESTLOG.replace('"FAIL"', '"OK"').replace('"TIMEOUT"', '"OK"')
BUILDS = ('build', 'build-asan', 'build-tsan', 'build-fuzz')


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def count(source_root, tmp_path):
    """Runs .ci/count_results.py on reports under tmp_path: (exit status, stdout, stderr)."""
    def run(xml='pytest.xml', folders=BUILDS):
        done = subprocess.run([sys.executable, str(source_root / '.ci' / 'count_results.py'), str(tmp_path / xml),
                               *(str(tmp_path / f) for f in folders)], capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout.strip(), done.stderr
    return run


@pytest.fixture
def good(tmp_path):
    write(tmp_path / 'pytest.xml', JUNIT)
    write(tmp_path / 'flat.xml', JUNIT_FLAT)
    for folder in BUILDS:
        write(tmp_path / folder / 'meson-logs' / 'testlog.json', TESTLOG)


def test_good_reports(count, good):
    status, out, err = count()
    # 7 - 2 - 2 = 3 pytest passes and 3 per testlog (OK, OK, EXPECTEDFAIL) in each of 4 folders.
    assert (status, out) == (0, '15 10 6'), f'good reports: 15 passed, 10 failed, 6 skipped (got {status} {out!r})\n{err}'
    assert err == '', f'good reports: nothing on stderr\n{err}'


def test_bare_testsuite_root(count, good):
    status, out, err = count(xml='flat.xml', folders=BUILDS[:1])
    assert (status, out) == (0, '6 2 1'), f'a bare <testsuite> root counts too (got {status} {out!r})\n{err}'


def test_missing_reports(count, good):
    status, out, err = count(xml='nothing.xml', folders=('build', 'build-gone'))
    assert (status, out) == (0, '3 4 1'), f'missing report and testlog: one failure each (got {status} {out!r})\n{err}'
    assert 'nothing.xml: missing' in err and 'build-gone/meson-logs/testlog.json: missing' in err, \
        f'each missing report is named\n{err}'


def test_malformed_reports(count, tmp_path):
    write(tmp_path / 'pytest.xml', JUNIT[:len(JUNIT) // 2])
    write(tmp_path / 'build' / 'meson-logs' / 'testlog.json',
          TESTLOG.splitlines()[0] + '\nnot json at all\n[1, 2]\n{"name": "no result"}\n' + TESTLOG.splitlines()[3] +
          '\n' + TESTLOG.splitlines()[1][:20])
    status, out, err = count(folders=('build',))
    # Kept: one OK and one SKIP; failures: the XML, the garbage line, the list, no result, the cut line.
    assert (status, out) == (0, '1 5 1'), f'malformed reports: 1 passed, 5 failed, 1 skipped (got {status} {out!r})\n{err}'
    assert err.count('counting failed: ') == 5, f'each unreadable report or line says "counting failed"\n{err}'
    assert 'pytest.xml: ' in err and 'testlog.json:2: ' in err and 'testlog.json:6: ' in err, \
        f'the failures name the file and the line\n{err}'


@pytest.mark.parametrize('text', ['<testsuite tests="two" skipped="0" failures="0" errors="0"/>',
                                  '<testsuite tests="1" skipped="0" failures="3" errors="0"/>'],
                         ids=['numbers', 'negative'])
def test_bad_numbers(count, tmp_path, text):
    write(tmp_path / 'bad.xml', text)
    status, out, err = count(xml='bad.xml', folders=())
    assert (status, out) == (0, '0 1 0') and 'counting failed: ' in err, f'one failure: {out!r} {err}'


@pytest.fixture
def ci_run(source_root, tmp_path):
    """.ci/run in a scratch tree: a copy of it and of .ci/count_results.py (or `counter` in its
    place) whose tools/test copies in the given reports and exits `tools_test_status`. Returns
    (exit status, last line, everything printed)."""
    def run(testlog=PASSING, junit=JUNIT_FLAT, tools_test_status=0, counter=None):
        reports = tmp_path / 'reports'
        write(reports / 'build-python' / 'pytest.xml', junit)
        for folder in BUILDS:
            write(reports / folder / 'meson-logs' / 'testlog.json', testlog)
        tree = tmp_path / 'tree'
        (tree / '.ci').mkdir(parents=True)
        shutil.copy(source_root / '.ci' / 'run', tree / '.ci' / 'run')
        if counter is None:
            shutil.copy(source_root / '.ci' / 'count_results.py', tree / '.ci' / 'count_results.py')
        else:
            write(tree / '.ci' / 'count_results.py', counter)
        write(tree / 'tools' / 'test', f'#!/usr/bin/env bash\ncp -r "{reports}/." .\nexit {tools_test_status}\n')
        (tree / 'tools' / 'test').chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k not in ('KILN_BUILD_DIR', 'KILN_HARDENING_PREFIX')}
        done = subprocess.run(['bash', str(tree / '.ci' / 'run')], capture_output=True, text=True, env=env, timeout=60)
        lines = done.stdout.strip().splitlines()
        return done.returncode, lines[-1] if lines else '', done.stdout + done.stderr
    return run


def test_ci_run_all_good(ci_run):
    status, last, out = ci_run()
    assert (status, last) == (0, '23 passed, 0 failed, 4 skipped'), f'.ci/run, all good: exit 0 ({status}, {last!r})\n{out}'


def test_ci_run_tools_test_fails(ci_run):
    status, last, out = ci_run(tools_test_status=1)
    assert status == 1, f'.ci/run: tools/test failing fails CI even with every count good ({status}, {last!r})\n{out}'


def test_ci_run_truncated_reports(ci_run):
    status, last, out = ci_run(testlog=PASSING + '{"name": "cut', junit=JUNIT_FLAT[:30])
    assert (status, last) == (1, '20 passed, 5 failed, 4 skipped'), \
        f'.ci/run, truncated reports: exit 1, each counted as a failure ({status}, {last!r})\n{out}'
    assert 'counting failed: ' in out, f'.ci/run, truncated reports: says counting failed\n{out}'


def test_ci_run_counter_crashed(ci_run):
    status, last, out = ci_run(counter='raise SystemExit("counter crashed")\n')
    assert (status, last) == (1, '0 passed, 1 failed, 0 skipped'), \
        f'.ci/run, counter crashed: exit 1 and a well-formed last line ({status}, {last!r})\n{out}'
    assert 'counting failed: .ci/count_results.py exited 1' in out, f'.ci/run names the counter that failed\n{out}'


def test_ci_run_counter_printed_words(ci_run):
    status, last, out = ci_run(counter='print("many few none")\n')
    assert (status, last) == (1, '0 passed, 1 failed, 0 skipped') and "printed 'many few none'" in out, \
        f'.ci/run, counter printed no numbers: counting failed, exit 1 ({status}, {last!r})\n{out}'
