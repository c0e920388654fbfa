"""The device scripts' step reports (bench/device_steps.sh), without a GPU: stand-in steps that pass
and fail show a passing step's summary lines only, a failing step's whole log section (a Catch2
failure's file:line and expansion included), a last line naming the failed steps, and exit 1 (0 when
all pass); then bench/device_checks.sh and bench/device_pdl.sh themselves, copied into a scratch
tree whose .carry/bin, nvidia-smi and Python scripts are stand-ins, exit 1 and show the failure when
one GPU test fails, and exit 0 when none does; and bench/revisions_ab.sh builds revisions of a small
stand-in project and runs stand-in revisions in alternating order, through kiln-bench where a
revision has it."""
import os
import shutil
import subprocess

import pytest

CATCH2_FAILURE = '''-------------------------------------------------------------------------------
PDL chain: the dependent launch waits
-------------------------------------------------------------------------------
tests/gpu/test_gpu_fp8.cpp:412: FAILED:
  CHECK( mismatches == 0 )
with expansion:
  3 == 0
===============================================================================
test cases: 2 | 1 passed | 1 failed
assertions: 9 | 8 passed | 1 failed
'''


def bash(script, cwd, env=None):
    done = subprocess.run(['bash', '-c', script], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=env or os.environ)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize('script', ['device_steps.sh', 'device_checks.sh', 'device_pdl.sh', 'device_deploy.sh',
                                    'device_remote_cache.sh', 'device_python.sh', 'device_sanitize.sh',
                                    'revisions_ab.sh'])
def test_scripts_parse(source_root, script):
    done = subprocess.run(['bash', '-n', str(source_root / 'bench' / script)], capture_output=True, text=True)
    assert done.returncode == 0, f'bash -n bench/{script}\n{done.stderr}'


@pytest.fixture
def helper(source_root):
    return source_root / 'bench' / 'device_steps.sh'


def test_helper_reports_failing_steps(helper, tmp_path):
    (tmp_path / 'failure.txt').write_text(CATCH2_FAILURE)
    script = f"""set -uo pipefail
. "{helper}"
{{
step good; echo "noise of a passing step"; echo "2 passed"; step_exit 0
step bad; cat failure.txt; printf '### not a step\\nexit 0\\nafter the fake header\\n'; (exit 3); step_exit $?
step two; (exit 5); step_exit $?; true; step_exit $?
}} > log1 2>&1
{{ step "other log"; echo "fine there"; step_exit 0; }} > log2 2>&1
steps_report '^###|^exit|passed' log1 log2
"""
    status, out, err = bash(script, tmp_path)
    lines = out.rstrip('\n').splitlines()
    assert status == 1, f'a failing step: exit 1 (got {status})\n{out + err}'
    assert lines and lines[-1] == '2 of 4 steps failed: bad, two', f'the last line names the failed steps ({lines[-1:]})\n{out}'
    assert '2 passed' in out and 'noise of a passing step' not in out, f'a passing step: its summary lines only\n{out}'
    assert 'fine there' not in out and any(line.startswith('### other log (') for line in lines), \
        f'a passing step in another log: summarized too\n{out}'
    for needed in ('tests/gpu/test_gpu_fp8.cpp:412: FAILED:', '  CHECK( mismatches == 0 )', 'with expansion:', '  3 == 0',
                   'after the fake header', 'exit 3'):
        assert needed in out, f"the failing step's whole section is printed: {needed.strip()!r}\n{out}"
    assert out.count('exit 5') == 1 and out.count('exit 0') >= 2, \
        f'a step with several commands fails if one does, and shows each status\n{out}'
    assert out.index('2 passed') < out.index('tests/gpu/test_gpu_fp8.cpp:412'), \
        f'the failing sections come after the summary, nearest the end\n{out}'


def test_helper_all_pass(helper, tmp_path):
    status, out, err = bash(f"""set -uo pipefail
. "{helper}"
{{ step one; echo "1 passed"; step_exit 0; step two; step_exit 0; }} > log 2>&1
steps_report '^###|passed' log""", tmp_path)
    assert status == 0 and out.rstrip('\n').splitlines()[-1:] == ['all 2 steps passed'], \
        f'all steps pass: exit 0 and says so (got {status})\n{out + err}'


def test_helper_missing_log(helper, tmp_path):
    status, out, err = bash(f"""set -uo pipefail
. "{helper}"
{{ step lost; step_exit 1; }} > /dev/null 2>&1
steps_report '^###' log-that-is-not-there""", tmp_path)
    assert status == 1 and 'lost' in out and 'no log section' in out, \
        f'a failing step whose log is missing still fails the report and says so (got {status})\n{out + err}'


def stand_in(path, body):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/usr/bin/env bash\n' + body)
    path.chmod(0o755)


def device_tree(root, tmp, name, fail_fp8):
    """The script and helper copied, and every program they call replaced by a stand-in."""
    tree = tmp / name
    for script in ('device_checks.sh', 'device_pdl.sh', 'device_sanitize.sh', 'device_steps.sh'):
        (tree / 'bench').mkdir(parents=True, exist_ok=True)
        shutil.copy(root / 'bench' / script, tree / 'bench' / script)
    stand_in(tree / '.carry/bin/test_gpu_fp8', f"cat <<'EOF'\n{CATCH2_FAILURE}EOF\nexit 1\n" if fail_fp8 else
             'echo "All tests passed (9 assertions in 2 test cases)"\n')
    for program in ('test_gpu_quant', 'test_gpu_leaks', 'example_c', 'example_rust', 'kiln-bench'):
        stand_in(tree / '.carry/bin' / program, 'echo "All tests passed"\n')
    stand_in(tree / '.carry/bin/kiln', 'if [ "$*" = "info --json" ]; then\n'
             '  echo \'{"devices": [{"fp8_act_quant": "twin"}], "counters": {}}\'\nelse echo "kiln $*: OK"; fi\n')
    stand_in(tree / 'fake-path/nvidia-smi', 'echo "NVIDIA H200, 570.00"\n')
    # --tool NAME --error-exitcode N, then the program and its arguments.
    stand_in(tree / 'fake-path/compute-sanitizer', 'shift 4\n"$@"\nstatus=$?\necho "========= ERROR SUMMARY: 0 errors"\nexit $status\n')
    for script in ('bench/quant_torch_check.py', 'examples/python/quantize.py'):
        (tree / script).parent.mkdir(parents=True, exist_ok=True)
        (tree / script).write_text('print("every variant OK")\n')
    (tree / 'out').mkdir()
    return tree


def run_device_script(tree, script):
    env = dict(os.environ, OUT=str(tree / 'out'), PATH=f'{tree / "fake-path"}:{os.environ["PATH"]}')
    done = subprocess.run(['bash', f'bench/{script}'], cwd=tree, capture_output=True, text=True, timeout=60, env=env)
    return done.returncode, done.stdout + done.stderr


DEVICE_SCRIPTS = [('device_checks.sh', 10, 'gpu_fp8'), ('device_pdl.sh', 4, 'pdl_chain, gpu_fp8'),
                  ('device_sanitize.sh', 4, 'memcheck fp8, racecheck fp8')]


@pytest.mark.parametrize('script, steps, failed', DEVICE_SCRIPTS, ids=[s[0] for s in DEVICE_SCRIPTS])
def test_device_script_passes(source_root, tmp_path, script, steps, failed):
    status, out = run_device_script(device_tree(source_root, tmp_path, f'{script}-pass', fail_fp8=False), script)
    assert status == 0 and f'all {steps} steps passed' in out, f'{script}, every stand-in passes: exit 0 ({status})\n{out}'


@pytest.mark.parametrize('script, steps, failed', DEVICE_SCRIPTS, ids=[s[0] for s in DEVICE_SCRIPTS])
def test_device_script_fails(source_root, tmp_path, script, steps, failed):
    status, out = run_device_script(device_tree(source_root, tmp_path, f'{script}-fail', fail_fp8=True), script)
    assert status == 1, f'{script}, the FP8 GPU suite fails: exit 1 ({status})\n{out}'
    assert 'tests/gpu/test_gpu_fp8.cpp:412: FAILED:' in out and '  3 == 0' in out, \
        f"{script}: the failing test's file:line and expansion are shown\n{out}"
    assert out.rstrip('\n').splitlines()[-1:] == [f'{failed.count(",") + 1} of {steps} steps failed: {failed}'], \
        f'{script}: the last line names {failed}\n{out[-400:]}'


FAKE_KILN = {
    'meson_options.txt': "option('nvrtc_root', type: 'string', value: '')\n",
    'meson.build': "project('fake_kiln', 'c')\nsubdir('src')\nsubdir('tools')\n",
    'src/meson.build': "kiln_lib = library('kiln', 'lib.c', version: '0.1.0', soversion: '0')\n",
    'src/lib.c': 'int kiln_answer(void) { return 1; }\n',
    'tools/meson.build': "executable('kiln', 'main.c', link_with: kiln_lib)\n",
}


def git(repo, *args):
    return subprocess.run(['git', '-C', str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def revisions_ab(source_root):
    return source_root / 'bench' / 'revisions_ab.sh'


@pytest.fixture
def repo(tmp_path):
    """A small stand-in project (a kiln command and libkiln in its layout) with three revisions:
    one, two and a broken one. Returns (repository, {name: short hash})."""
    repo = tmp_path / 'revisions-repo'
    repo.mkdir()
    git(repo, 'init', '-q')
    git(repo, 'config', 'user.email', 'test@example.com')
    git(repo, 'config', 'user.name', 'test')
    hashes = {}
    for name, source in (('one', 'int main(void) { return 0; }\n'), ('two', 'int main(void) { return 0; } /* two */\n'),
                         ('broken', 'int main(void) { return }\n')):
        for path, text in {**FAKE_KILN, 'tools/main.c': source}.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        git(repo, 'add', '-A')
        git(repo, 'commit', '-q', '-m', name)
        hashes[name] = git(repo, 'rev-parse', '--short', 'HEAD').strip()
    return repo, hashes


def worktrees(repo):
    return git(repo, 'worktree', 'list').strip().splitlines()


def test_revisions_ab_build(revisions_ab, repo):
    repo, hashes = repo
    carry = repo / '.carry' / 'ab'
    done = subprocess.run(['bash', str(revisions_ab), 'build', str(carry), 'HEAD~2', 'HEAD~1'], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f'revisions_ab.sh build of two revisions: exit 0 ({done.returncode})\n' + \
        done.stdout + done.stderr
    listed = (carry / 'revisions').read_text().split() if (carry / 'revisions').exists() else []
    assert listed == [hashes['one'], hashes['two']], f'DIR/revisions lists them in the order given ({listed})'
    for hash in listed:
        assert (carry / hash / 'bin' / 'kiln').is_file() and (carry / hash / 'lib' / 'libkiln.so.0').exists(), \
            f'{hash}: bin/kiln and lib/libkiln.so.0 are there'
    assert len(worktrees(repo)) == 1, f'no worktree is left behind\n{worktrees(repo)}'


def test_revisions_ab_build_fails(revisions_ab, repo, tmp_path):
    repo, hashes = repo
    done = subprocess.run(['bash', str(revisions_ab), 'build', str(tmp_path / 'broken-ab'), 'HEAD'], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and f'building HEAD ({hashes["broken"]}) failed' in done.stderr and \
        'main.c' in done.stderr, \
        f"a revision that does not build: exit 1 with the compiler's output ({done.returncode})\n{done.stderr[-600:]}"
    assert len(worktrees(repo)) == 1, f'no worktree is left behind after a failed build\n{worktrees(repo)}'


def test_revisions_ab_run(revisions_ab, tmp_path):
    # Stand-in revisions whose kiln prints what it was given; the second fails.
    ab = tmp_path / '.carry' / 'ab'
    for hash, status in (('aaa', 0), ('bbb', 3)):
        stand_in(ab / hash / 'bin' / 'kiln', f'echo "{hash} $* LD=$LD_LIBRARY_PATH PDL=${{KILN_PDL:-}}"\nexit {status}\n')
    (ab / 'revisions').write_text('aaa\nbbb\n')
    env = dict(os.environ, OUT=str(tmp_path / 'out'), KILN_PDL='1')
    done = subprocess.run(['bash', str(revisions_ab), 'run', '.carry/ab', '2', '--only', 'gpu'], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=env)
    rounds = [line.split(':')[0] for line in done.stdout.splitlines() if line.startswith('round ')]
    assert rounds == ['round 1 aaa', 'round 1 bbb', 'round 2 bbb', 'round 2 aaa'], \
        f'run alternates, the order reversed in the second round ({rounds})\n{done.stdout}'
    assert done.returncode == 1 and 'round 1 bbb: exit 3' in done.stdout, \
        f'a failing revision: every run still runs, then exit 1 ({done.returncode})\n{done.stdout + done.stderr}'
    log = tmp_path / 'out' / 'bench-aaa-2.log'
    log = log.read_text() if log.exists() else ''
    assert log.startswith('aaa bench --only gpu LD=.carry/ab/aaa/lib:') and 'PDL=1' in log, \
        f'each run gets `bench` and the arguments, its own libkiln first, and the environment\n{log}'


def test_revisions_ab_run_kiln_bench(revisions_ab, tmp_path):
    # A revision that has kiln-bench runs it; `kiln bench` is only for revisions without it.
    ab = tmp_path / '.carry' / 'ab'
    stand_in(ab / 'ddd' / 'bin' / 'kiln', 'echo "kiln $*"\n')
    stand_in(ab / 'ddd' / 'bin' / 'kiln-bench', 'echo "kiln-bench $*"\n')
    (ab / 'revisions').write_text('ddd\n')
    done = subprocess.run(['bash', str(revisions_ab), 'run', '.carry/ab', '1', '--only', 'gpu'], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, OUT=str(tmp_path / 'out')))
    log = tmp_path / 'out' / 'bench-ddd-1.log'
    log = log.read_text() if log.exists() else ''
    assert done.returncode == 0 and log.startswith('kiln-bench --only gpu'), \
        f'a revision with kiln-bench runs it ({done.returncode}, {log!r})\n{done.stdout + done.stderr}'


@pytest.mark.parametrize('args, needed', [(['run', '.carry/ab', '0'], "ROUNDS must be a positive integer, got '0'"),
                                          (['run', '.carry/none', '1'], '.carry/none/revisions is missing or empty'),
                                          (['build', '.carry/x'], 'name at least one revision'),
                                          (['frobnicate', '.carry/x'], "unknown mode 'frobnicate'")],
                         ids=['no rounds', 'no revisions', 'build nothing', 'unknown mode'])
def test_revisions_ab_usage(revisions_ab, tmp_path, args, needed):
    done = subprocess.run(['bash', str(revisions_ab), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and needed in done.stderr, f'revisions_ab.sh {" ".join(args)}: exit 2, says why\n' + \
        done.stderr
