"""What the command-line tests share: each check prints ok or FAIL with its detail, and the
program's exit status says whether any failed."""

FAILURES = []


def check(condition, what, detail=''):
    print(('ok   ' if condition else 'FAIL ') + what + ('' if condition or not detail else f'\n     {detail}'))
    if not condition:
        FAILURES.append(what)


def exit_status():
    if FAILURES:
        print(f'{len(FAILURES)} check(s) failed')
        return 1
    return 0
