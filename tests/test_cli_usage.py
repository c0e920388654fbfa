#!/usr/bin/env python3
"""The kiln command line's exit statuses, as a script sees them: 0 success, 1 failure, 2 usage
error. Every usage error names the option (or command) and what it accepts.

Usage: test_cli_usage.py KILN_EXECUTABLE
"""
import os
import pathlib
import subprocess
import sys
import tempfile
from checks import check, exit_status

def run(kiln, *args, env=None):
    return subprocess.run([kiln, *args], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=240)


def usage_error(kiln, args, *words, env=None):
    """`kiln ARGS` exits 2 and its message holds every one of `words`."""
    done = run(kiln, *args, env=env)
    shown = ' '.join(args)
    check(done.returncode == 2, f'kiln {shown}: exit 2 (got {done.returncode})', done.stderr.strip())
    check(all(word in done.stderr for word in words), f'kiln {shown}: the message names {words}',
          done.stderr.strip()[:600])
    check(len(done.stderr) < 1000, f'kiln {shown}: the message is short ({len(done.stderr)} characters)')
    return done


def test_usage_errors(kiln, tmp):
    usage_error(kiln, ['warm', '--jobs', '0'], '--jobs', '1..256', "'0'")
    usage_error(kiln, ['dump', '--jobs', '0', '--out', str(tmp / 'jobs')], '--jobs', '1..256')
    usage_error(kiln, ['pick', '--m', '-1', '--k', '7168'], '--m', '1..2147483647', "'-1'")
    usage_error(kiln, ['pick', '--m', 'abc', '--k', '7168'], '--m', '1..2147483647', "'abc'")
    usage_error(kiln, ['pick', '--m', '99999999999999999999999', '--k', '7168'], '--m', '1..2147483647')
    usage_error(kiln, ['pick', '--m', '16', '--k', '100'], '--k', 'multiple of 128', "'100'")
    usage_error(kiln, ['pick', '--m', '16', '--k', '7168', '--sm-count', '0'], '--sm-count', '1..65535')
    usage_error(kiln, ['pick', '--k', '7168'], '--m')
    # selftest takes pick's bounds, checked before anything runs.
    usage_error(kiln, ['selftest', '--k', '100'], '--k', 'multiple of 128 in 128..4294967168', "'100'")
    usage_error(kiln, ['selftest', '--m', '0'], '--m', '1..2147483647', "'0'")
    usage_error(kiln, ['selftest', '--m', '-1'], '--m', '1..2147483647', "'-1'")
    usage_error(kiln, ['info', '--frobnicate'], '--frobnicate')
    usage_error(kiln, ['frobnicate'], "unknown command 'frobnicate'", 'info', 'warm')
    usage_error(kiln, ['--frobnicate'], "'--frobnicate'", 'info')
    usage_error(kiln, ['cache', 'frobnicate'], "'frobnicate'", 'stats', 'verify', 'clear')
    usage_error(kiln, ['compile', '--arch', 'sm_999'], '--arch', 'sm_999')
    usage_error(kiln, ['compile', '--module', 'nope'], '--module', 'per_token_group_quant_fp8',
                'kiln list --variants', "'nope'")
    # What the message offers is taken: a variant's name.
    done = run(kiln, 'compile', '--module', 'per_token_group_quant-fp16-g64-int8-col_tma', '--arch', 'sm_90a')
    check(done.returncode == 0, f'compile --module VARIANT exits 0 (got {done.returncode})', done.stderr)
    # A bad environment setting is not a usage error: the command line was fine.
    done = run(kiln, 'compile', '--module', 'per_token_group_quant_fp8', env={'KILN_ARCH': 'garbage'})
    check(done.returncode == 1, f'a bad KILN_ARCH is a failure, exit 1 (got {done.returncode})', done.stderr)


def test_option_values(kiln, tmp):
    """Every invalid option value is a usage error (exit 2) in every command, in kiln's words: the
    option, what was expected, and the value; never CLI11's own phrases."""
    parser_words = ('File is actually a directory', 'required UINT', 'File does not exist', 'not in {',
                    'Check ', 'FAILED')

    def kiln_words(args, *words):
        done = usage_error(kiln, args, *words)
        check(not any(w in done.stderr for w in parser_words), f'kiln {" ".join(args)}: no parser phrases',
              done.stderr.strip()[:400])

    existing = tmp / 'existing-file'
    existing.write_text('')
    kiln_words(['pick', '--variant', 'nonsense', '--m', '16', '--k', '7168'], '--variant', "'nonsense'")
    kiln_words(['dump', '--arch', 'sm_90a', '--out', str(existing)], '--out', str(existing), 'folder')
    kiln_words(['dump', '--arch', 'sm_90a', '--out', str(existing / 'below')], '--out', 'folder')
    kiln_words(['pick', '--m'], '--m', '1..2147483647')
    kiln_words(['warm', '--jobs'], '--jobs', '1..256')
    kiln_words(['warm', '--variants', str(tmp)], '--variants', str(tmp), 'folder')
    kiln_words(['warm', '--variants', str(tmp / 'absent.txt')], '--variants', 'absent.txt')
    kiln_words(['pack', '--list', str(tmp)], '--list', str(tmp))
    kiln_words(['pack', '--verify', str(tmp / 'absent.kpack')], '--verify', 'absent.kpack')
    kiln_words(['pick', '--m', '16', '--k', '7168', '--twin', 'sometimes'], '--twin', 'on, off, auto', "'sometimes'")
    kiln_words(['dump', '--module', 'per_token_group_quant in=bf16 in=fp16', '--arch', 'sm_90a', '--out',
                str(tmp / 'twice')], '--module', "'in'", 'twice')
    kiln_words(['compile', '--module', 'per_token_group_quant group=48', '--arch', 'sm_90a'], '--module', "'group'",
               '32, 64, 128')
    check(not (tmp / 'twice').exists(), 'dump: nothing written after a usage error')
    # dump --module takes the name=value spelling that pick and warm take.
    out = tmp / 'spelled'
    done = run(kiln, 'dump', '--module', 'per_token_group_quant in=fp16 group=64', '--arch', 'sm_90a', '--out', str(out))
    check(done.returncode == 0 and (out / 'per_token_group_quant-fp16-g64-e4m3-row.sm_90a.ptx').exists(),
          'dump --module "family name=value ..." compiles that variant', f'{done.returncode} {done.stderr[-400:]}')


def test_source_must_be_a_file(kiln, tmp):
    for path, why in ((tmp, 'folder'), (tmp / 'missing.cu', 'No such file')):
        done = run(kiln, 'compile', '--source', str(path), '--arch', 'sm_90a')
        check(done.returncode == 2, f'--source {path}: exit 2 (got {done.returncode})', done.stdout + done.stderr)
        check('--source' in done.stderr and str(path) in done.stderr and why in done.stderr,
              f'--source {path}: the message names the option, the path and why', done.stderr)
        check('compiled' not in done.stdout, f'--source {path}: nothing compiled', done.stdout)


def test_success_and_help(kiln):
    done = run(kiln, 'pick', '--m', '4096', '--k', '7168')
    check(done.returncode == 0 and 'kernel:' in done.stdout, f'a good pick exits 0 ({done.returncode})', done.stderr)
    done = run(kiln, 'pick', '--m', '2147483647', '--k', '4294967168', '--sm-count', '65535')
    check(done.returncode == 0, f'the ends of the ranges are accepted ({done.returncode})', done.stderr)
    # CLI11 alone reads a leading 0 as octal: 010 would be 8 and 08 an error.
    for text, value in (('010', 10), ('0008', 8), ('000000000000000000008', 8)):
        done = run(kiln, 'pick', '--m', text, '--k', '7168')
        check(done.returncode == 0 and done.stdout.startswith(f'm={value} '),
              f'--m {text} is decimal {value} ({done.returncode})', done.stdout + done.stderr)
    # Without a GPU selftest says so and succeeds; with one it quantizes 8 rows.
    done = run(kiln, 'selftest', '--m', '08', '--k', '128')
    check(done.returncode == 0 and ('no GPU' in done.stdout or 'm=8 k=128:' in done.stdout),
          f'selftest --m 08 is decimal 8 ({done.returncode})', done.stdout + done.stderr)
    done = run(kiln, '--help')
    check(done.returncode == 0, f'--help exits 0 ({done.returncode})')
    check('Exit status' in done.stdout and '2 usage error' in done.stdout and '1 failure' in done.stdout,
          '--help documents the exit statuses', done.stdout[-600:])
    done = run(kiln, '--version')
    check(done.returncode == 0 and done.stdout.strip() != '', f'--version exits 0 ({done.returncode})')


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        test_usage_errors(kiln, tmp)
        test_option_values(kiln, tmp)
        test_source_must_be_a_file(kiln, tmp)
        test_success_and_help(kiln)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
