"""The README as a newcomer gets it: short (<= 200 lines), no dates, every link inside the repository
pointing at a file that exists, and every code example a copy of a file the tests build and run
(examples/quickstart/: example_quickstart and example_quickstart_gpu in examples/meson.build,
tests/python/test_readme_example.py), so that the examples cannot rot. pyproject.toml takes the
README as the package's description."""
import re

LANGUAGES = {'c': 'quantize_fp8.c', 'cpp': 'quantize_fp8.cpp', 'python': 'quantize_fp8.py'}
# Shell blocks show commands, which the README's own words describe; these are the ones it may show.
COMMANDS = ('tools/main', 'tools/test', 'pip install', 'meson ', 'ninja ', 'meson install', 'kiln ', 'python -m kiln')


def fenced_blocks(text):
    """(language, body) of every fenced block."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r'^```(\w*)\n(.*?)^```$', text, re.M | re.S)]


def problems(root):
    readme = (root / 'README.md').read_text()
    found = []
    lines = readme.count('\n')
    if lines > 200:
        found.append(f'README.md has {lines} lines; at most 200')
    for date in re.findall(r'20\d\d-[01]\d-[0-3]\d', readme):
        found.append(f'README.md names a date: {date}')
    shown = set()
    for language, body in fenced_blocks(readme):
        if language in LANGUAGES:
            path = root / 'examples' / 'quickstart' / LANGUAGES[language]
            if body != path.read_text():
                found.append(f'the README\'s {language} block is not {path.relative_to(root)} as it is')
            shown.add(language)
        elif language in ('sh', 'console'):
            for line in body.splitlines():
                command = line.removeprefix('$ ')
                if line.strip() and not line.startswith('#') and not command.startswith(COMMANDS):
                    found.append(f'a shell block runs something the README test does not know: {line!r}')
        else:
            found.append(f'a code block of language {language!r}: only sh, c, cpp and python are checked')
    for language in sorted(set(LANGUAGES) - shown):
        found.append(f'the README shows no {language} example')
    for target in re.findall(r'\]\(([^)#\s]+)(?:#[^)]*)?\)', readme):
        if not re.match(r'[a-z]+://', target) and not (root / target).exists():
            found.append(f'README.md links to {target}, which does not exist')
    pyproject = (root / 'pyproject.toml').read_text()
    if not re.search(r'^readme\s*=\s*"README.md"', pyproject, re.M):
        found.append('pyproject.toml does not take README.md as the package description')
    return found


def test_readme(source_root):
    found = problems(source_root)
    assert not found, '\n'.join(found)
