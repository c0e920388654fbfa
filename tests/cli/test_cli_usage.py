"""The kiln command line's exit statuses, as a script sees them: 0 success, 1 failure, 2 usage
error. Every usage error names the option (or command) and what it accepts."""
import os
import subprocess

import pytest


def run(kiln, *args, env=None):
    return subprocess.run([kiln, *args], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=240)


def assert_usage_error(kiln, args, words):
    """`kiln ARGS` exits 2 and its message, short, holds every one of `words`."""
    done = run(kiln, *args)
    shown = ' '.join(args)
    assert done.returncode == 2, f'kiln {shown}: exit 2 (got {done.returncode})\n{done.stderr.strip()}'
    assert all(word in done.stderr for word in words), f'kiln {shown}: the message names {words}\n' + \
        done.stderr.strip()[:600]
    assert len(done.stderr) < 1000, f'kiln {shown}: the message is short ({len(done.stderr)} characters)'
    return done


def with_tmp(args, tmp):
    return [arg.format(tmp=tmp) for arg in args]


USAGE_ERRORS = [
    (['warm', '--jobs', '0'], ['--jobs', '1..256', "'0'"]),
    (['dump', '--jobs', '0', '--out', '{tmp}/jobs'], ['--jobs', '1..256']),
    (['pick', '--m', '-1', '--k', '7168'], ['--m', '1..2147483647', "'-1'"]),
    (['pick', '--m', 'abc', '--k', '7168'], ['--m', '1..2147483647', "'abc'"]),
    (['pick', '--m', '99999999999999999999999', '--k', '7168'], ['--m', '1..2147483647']),
    (['pick', '--m', '16', '--k', '100'], ['--k', 'multiple of 128', "'100'"]),
    (['pick', '--m', '16', '--k', '7168', '--sm-count', '0'], ['--sm-count', '1..65535']),
    (['pick', '--k', '7168'], ['--m']),
    # selftest takes pick's bounds, checked before anything runs.
    (['selftest', '--k', '100'], ['--k', 'multiple of 128 in 128..4294967168', "'100'"]),
    (['selftest', '--m', '0'], ['--m', '1..2147483647', "'0'"]),
    (['selftest', '--m', '-1'], ['--m', '1..2147483647', "'-1'"]),
    (['info', '--frobnicate'], ['--frobnicate']),
    (['frobnicate'], ["unknown command 'frobnicate'", 'info', 'warm']),
    (['--frobnicate'], ["'--frobnicate'", 'info']),
    (['cache', 'frobnicate'], ["'frobnicate'", 'stats', 'verify', 'clear']),
    (['compile', '--arch', 'sm_999'], ['--arch', 'sm_999']),
    (['compile', '--module', 'nope'], ['--module', 'per_token_group_quant_fp8', 'kiln list --variants', "'nope'"]),
]


@pytest.mark.parametrize('args, words', USAGE_ERRORS, ids=[' '.join(args) for args, _ in USAGE_ERRORS])
def test_usage_error(kiln, tmp_path, args, words):
    assert_usage_error(kiln, with_tmp(args, tmp_path), words)


def test_compile_takes_the_offered_variant_name(kiln):
    # What the --module message offers is taken: a variant's name.
    done = run(kiln, 'compile', '--module', 'per_token_group_quant-fp16-g64-int8-col_tma', '--arch', 'sm_90a')
    assert done.returncode == 0, f'compile --module VARIANT exits 0 (got {done.returncode})\n{done.stderr}'


def test_bad_environment_is_a_failure_not_a_usage_error(kiln):
    # The command line was fine: a bad setting is a failure.
    done = run(kiln, 'compile', '--module', 'per_token_group_quant_fp8', env={'KILN_ARCH': 'garbage'})
    assert done.returncode == 1, f'a bad KILN_ARCH is a failure, exit 1 (got {done.returncode})\n{done.stderr}'


# CLI11's own phrases, which no message may show: every invalid value is reported in kiln's words.
PARSER_WORDS = ('File is actually a directory', 'required UINT', 'File does not exist', 'not in {', 'Check ', 'FAILED')
OPTION_VALUES = [
    (['pick', '--variant', 'nonsense', '--m', '16', '--k', '7168'], ['--variant', "'nonsense'"]),
    (['dump', '--arch', 'sm_90a', '--out', '{tmp}/existing-file'], ['--out', '{tmp}/existing-file', 'folder']),
    (['dump', '--arch', 'sm_90a', '--out', '{tmp}/existing-file/below'], ['--out', 'folder']),
    (['pick', '--m'], ['--m', '1..2147483647']),
    (['warm', '--jobs'], ['--jobs', '1..256']),
    (['warm', '--variants', '{tmp}'], ['--variants', '{tmp}', 'folder']),
    (['warm', '--variants', '{tmp}/absent.txt'], ['--variants', 'absent.txt']),
    (['pack', '--list', '{tmp}'], ['--list', '{tmp}']),
    (['pack', '--verify', '{tmp}/absent.kpack'], ['--verify', 'absent.kpack']),
    (['pick', '--m', '16', '--k', '7168', '--twin', 'sometimes'], ['--twin', 'on, off, auto', "'sometimes'"]),
    (['dump', '--module', 'per_token_group_quant in=bf16 in=fp16', '--arch', 'sm_90a', '--out', '{tmp}/twice'],
     ['--module', "'in'", 'twice']),
    (['compile', '--module', 'per_token_group_quant group=48', '--arch', 'sm_90a'], ['--module', "'group'", '32, 64, 128']),
]


@pytest.mark.parametrize('args, words', OPTION_VALUES, ids=[' '.join(args) for args, _ in OPTION_VALUES])
def test_invalid_option_value(kiln, tmp_path, args, words):
    """Every invalid option value is a usage error (exit 2) in every command, in kiln's words: the
    option, what was expected, and the value; never CLI11's own phrases. Nothing is written."""
    (tmp_path / 'existing-file').write_text('')
    done = assert_usage_error(kiln, with_tmp(args, tmp_path), with_tmp(words, tmp_path))
    assert not any(w in done.stderr for w in PARSER_WORDS), f'kiln {" ".join(args)}: no parser phrases\n' + \
        done.stderr.strip()[:400]
    assert not (tmp_path / 'twice').exists(), 'dump: nothing written after a usage error'


def test_dump_module_takes_name_value_spelling(kiln, tmp_path):
    # dump --module takes the name=value spelling that pick and warm take.
    out = tmp_path / 'spelled'
    done = run(kiln, 'dump', '--module', 'per_token_group_quant in=fp16 group=64', '--arch', 'sm_90a', '--out', str(out))
    assert done.returncode == 0 and (out / 'per_token_group_quant-fp16-g64-e4m3-row.sm_90a.ptx').exists(), \
        f'dump --module "family name=value ..." compiles that variant: {done.returncode} {done.stderr[-400:]}'


@pytest.mark.parametrize('name, why', [(None, 'folder'), ('missing.cu', 'No such file')])
def test_source_must_be_a_file(kiln, tmp_path, name, why):
    path = tmp_path / name if name else tmp_path
    done = run(kiln, 'compile', '--source', str(path), '--arch', 'sm_90a')
    assert done.returncode == 2, f'--source {path}: exit 2 (got {done.returncode})\n{done.stdout + done.stderr}'
    assert '--source' in done.stderr and str(path) in done.stderr and why in done.stderr, \
        f'--source {path}: the message names the option, the path and why\n{done.stderr}'
    assert 'compiled' not in done.stdout, f'--source {path}: nothing compiled\n{done.stdout}'


def test_good_pick_and_range_ends(kiln):
    done = run(kiln, 'pick', '--m', '4096', '--k', '7168')
    assert done.returncode == 0 and 'kernel:' in done.stdout, f'a good pick exits 0 ({done.returncode})\n{done.stderr}'
    done = run(kiln, 'pick', '--seed', '--m', '2147483647', '--k', '4294967168', '--sm-count', '65535')
    assert done.returncode == 0, f'the ends of the ranges are accepted ({done.returncode})\n{done.stderr}'
    # The family kernel's flat grid cannot hold that shape: kiln_quant refuses it, and so does the pick.
    done = run(kiln, 'pick', '--m', '2147483647', '--k', '4294967168', '--sm-count', '65535')
    assert done.returncode == 1 and 'flat grid' in done.stderr and 'grid' not in done.stdout, \
        f'the launch\'s refusal, exit 1 ({done.returncode})\n{done.stdout + done.stderr}'


# CLI11 alone reads a leading 0 as octal: 010 would be 8 and 08 an error.
@pytest.mark.parametrize('text, value', [('010', 10), ('0008', 8), ('000000000000000000008', 8)])
def test_leading_zero_is_decimal(kiln, text, value):
    done = run(kiln, 'pick', '--seed', '--m', text, '--k', '7168')
    assert done.returncode == 0 and done.stdout.startswith(f'm={value} '), \
        f'--m {text} is decimal {value} ({done.returncode})\n{done.stdout + done.stderr}'


def test_selftest_leading_zero(kiln):
    # Without a GPU selftest says so and succeeds; with one it quantizes 8 rows.
    done = run(kiln, 'selftest', '--m', '08', '--k', '128')
    assert done.returncode == 0 and ('no GPU' in done.stdout or 'm=8 k=128:' in done.stdout), \
        f'selftest --m 08 is decimal 8 ({done.returncode})\n{done.stdout + done.stderr}'


def test_help_and_version(kiln):
    done = run(kiln, '--help')
    assert done.returncode == 0, f'--help exits 0 ({done.returncode})'
    assert 'Exit status' in done.stdout and '2 usage error' in done.stdout and '1 failure' in done.stdout, \
        f'--help documents the exit statuses\n{done.stdout[-600:]}'
    done = run(kiln, '--version')
    assert done.returncode == 0 and done.stdout.strip() != '', f'--version exits 0 ({done.returncode})'
