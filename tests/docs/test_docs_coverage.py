"""The reference docs stay complete and current:

- docs/configuration.md: every KILN_* variable the library, the kiln program and the Python
  package read has a row in the table under "Environment variables", every one the build and test
  scripts (tools/, .ci/) read a row in the table under "Build and test scripts"; and every row
  names a variable that those sources still read.
- docs/cli.md: every command `kiln --help` lists (and their subcommands) has a section headed
  `kiln COMMAND`, and every option (long and short) its `--help` prints has a row in a table of
  that section (`-h`/`--help` and `kiln --version`: in a table anywhere); no section or option row
  is left for a command or option the program does not list.
"""
import re
import subprocess

NAME = r'KILN_[A-Z0-9_]+'

# C and C++: the functions that read a variable named by their first argument. getenv is the
# primitive; Config's readers in src/base/config.cpp (the one place the library reads the
# environment) carry these names too.
CPP_READERS = ('getenv', 'secure_getenv', 'env_value', 'switch_lever', 'ms_from_env')
# Calls of a primitive with a name that is not a literal. Each is here with why it reads no KILN_*
# variable of its own, or where its name comes from; any other such call fails the test, so a new
# wrapper or a name assembled at run time cannot slip past the scan. A value 'constant' resolves
# the name from its definition `NAME = "KILN_..."` in src or include.
CPP_INDIRECT = {
    ('src/base/config.cpp', 'name'): "the parameter of Config's readers, each called with a literal name, which the "
                                     'scan reads',
}
# `name = "KILN_..."` definitions in src and include, for CPP_INDIRECT's constants.
CONSTANTS = {}
CPP_SUFFIXES = ('.c', '.cc', '.cpp', '.cxx', '.h', '.hh', '.hpp', '.hxx', '.cu', '.cuh', '.inl')

# Options every command prints; docs/cli.md describes them once, in one table, not in each section.
EVERY_COMMAND_OPTIONS = {'-h', '--help'}


def strip_c_comments(text):
    """`text` without // and /* */ comments; string and character literals (raw strings included)
    are kept whole, so "redis://" is not a comment."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            end = text.find('\n', i)
            i = n if end < 0 else end
        elif text.startswith('/*', i):
            end = text.find('*/', i + 2)
            out.append(' ')
            i = n if end < 0 else end + 2
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            open_paren = text.find('(', i + 2)
            delimiter = text[i + 2:open_paren]
            end = text.find(')' + delimiter + '"', open_paren)
            end = n if end < 0 else end + len(delimiter) + 2
            out.append(text[i:end])
            i = end
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def strip_hash_comments(text):
    """Shell or Python source without its # comments (a # that starts a word: `${#list[@]}` stays)."""
    return '\n'.join(re.sub(r'(^|\s)#.*', r'\1', line) for line in text.splitlines())


def language(path):
    if path.suffix in CPP_SUFFIXES:
        return 'cpp'
    if path.suffix == '.py':
        return 'python'
    if path.suffix in ('.sh', '.bash'):
        return 'shell'
    try:
        first = path.open('rb').readline()
    except OSError:
        return None
    if first.startswith(b'#!'):
        if b'python' in first:
            return 'python'
        if re.search(rb'\b(ba|da|z)?sh\b', first):
            return 'shell'
    return None


def files_under(root, folders):
    for folder in folders:
        base = root / folder
        if base.is_file():
            yield base
            continue
        for path in sorted(base.rglob('*')):
            if path.is_file() and '__pycache__' not in path.parts:
                yield path


def cpp_reads(text, rel, problems):
    code = strip_c_comments(text)
    names = set()
    # A literal that is only the start of a name ("KILN_REMOTE_CACHE_" + ..., "KILN_{}"): a name
    # assembled at run time, which no scan can follow.
    for literal in re.findall(r'"(KILN_[^"]*)"', code):
        prefix = re.match(r'KILN_[A-Z0-9_]*', literal)
        if prefix.group().endswith('_') or literal[prefix.end():prefix.end() + 1] in ('{', '%'):
            problems.append(f'{rel}: a variable name assembled from "{literal}": name its variables in the test')
    for reader, argument in re.findall(r'\b(' + '|'.join(CPP_READERS) + r')\s*\(\s*([^,)]*)', code):
        argument = argument.strip()
        literal = re.fullmatch(r'"([^"]*)"', argument)
        if literal:
            if re.fullmatch(NAME, literal.group(1)):
                names.add(literal.group(1))
            continue
        if re.search(r'[\w>*&]\s*[\s*&]\s*\w+$', argument):
            continue  # a declaration's parameter (`const char* name`): the definition of a reader
        key = (rel, argument.removeprefix('std::').strip())
        if key not in CPP_INDIRECT:
            problems.append(f'{rel}: {reader}({argument}) reads a variable the test cannot name: add it to CPP_INDIRECT')
        elif CPP_INDIRECT[key] == 'constant':
            if argument in CONSTANTS:
                names.add(CONSTANTS[argument])
            else:
                problems.append(f'{rel}: {reader}({argument}): no definition `{argument} = "KILN_..."` found')
    return names


def python_reads(text):
    code = strip_hash_comments(text)
    quoted = r'''['"](''' + NAME + r''')['"]'''
    names = set(re.findall(r'\b(?:getenv|environ\.get|environ\.pop|environ\.setdefault)\s*\(\s*' + quoted, code))
    names |= set(re.findall(r'\benviron\s*\[\s*' + quoted + r'\s*\]', code))
    names |= set(re.findall(quoted + r'\s+(?:not\s+)?in\s+(?:os\.)?environ\b', code))
    return names


def shell_reads(text):
    # $KILN_X, ${KILN_X}, ${KILN_X:-default}, ${KILN_X:+...}, ${#KILN_X}: an expansion is a read;
    # `KILN_X=1 command` and `export KILN_X=1` only set it for another script, which reads it.
    return set(re.findall(r'\$\{?#?(' + NAME + r')', strip_hash_comments(text)))


def variables_read(root, folders, problems):
    """{name: [files]} of the KILN_* variables read by the sources under `folders`."""
    found = {}
    for path in files_under(root, folders):
        kind = language(path)
        if kind is None:
            continue
        rel = path.relative_to(root).as_posix()
        text = path.read_text(errors='replace')
        if kind == 'cpp':
            names = cpp_reads(text, rel, problems)
        elif kind == 'python':
            names = python_reads(text)
        else:
            names = shell_reads(text)
        for name in names:
            found.setdefault(name, []).append(rel)
    return found


def table_rows_by_section(markdown):
    """{section heading: set of KILN_* names in the first cell of its tables' rows}."""
    sections = {}
    heading = ''
    for line in markdown.splitlines():
        if line.startswith('#'):
            heading = line.lstrip('#').strip()
            continue
        cells = line.strip().split('|')
        if not line.lstrip().startswith('|') or len(cells) < 3 or re.fullmatch(r'[\s:-]*', cells[1]):
            continue
        sections.setdefault(heading, set()).update(re.findall(NAME, cells[1]))
    return sections


def check_configuration(root, missing):
    problems = []
    for path in files_under(root, ['src', 'include']):
        if path.suffix in CPP_SUFFIXES:
            code = strip_c_comments(path.read_text(errors='replace'))
            CONSTANTS.update(re.findall(r'\b(\w+)\s*=\s*"(' + NAME + r')"\s*;', code))
    # What a user of kiln sets: read by the library (src, include), the Python package and the kiln
    # program (tools/*.cpp). What a developer sets: read by the scripts of tools/ and .ci/.
    runtime = variables_read(root, ['src', 'include', 'python'], problems)
    scripts = {}
    for name, where in variables_read(root, ['tools', '.ci'], problems).items():
        for rel in where:
            table = runtime if language(root / rel) == 'cpp' else scripts
            table.setdefault(name, []).append(rel)
    missing.extend(sorted(set(problems)))

    doc = root / 'docs' / 'configuration.md'
    if not doc.is_file():
        missing.append(f'{doc} does not exist')
        return
    sections = table_rows_by_section(doc.read_text())
    tables = {'Environment variables': runtime, 'Build and test scripts': scripts}
    for section, read in tables.items():
        if section not in sections:
            missing.append(f'docs/configuration.md: no table under a heading "{section}"')
            continue
        rows = sections[section]
        for name in sorted(set(read) - rows):
            missing.append(f'docs/configuration.md, "{section}": no row for {name} (read in {", ".join(sorted(set(read[name])))})')
        for name in sorted(rows - set(read)):
            missing.append(f'docs/configuration.md, "{section}": row {name} is read by none of those sources')
    for section, rows in sections.items():
        if section not in tables and rows:
            missing.append(f'docs/configuration.md: variables in a table under "{section}", which the test does not '
                           f'check against the sources: {", ".join(sorted(rows))}')
    print(f'configuration: {len(runtime)} runtime variables, {len(scripts)} script variables')


def help_of(kiln, path):
    done = subprocess.run([kiln, *path, '--help'], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f'kiln {" ".join(path)} --help exited {done.returncode}: {done.stderr.strip()}')
    return done.stdout


def parse_help(text):
    """(options, subcommands) of one CLI11 help text: the option names in the left column of
    "Options:" and the words of "Subcommands:"."""
    options, subcommands = [], []
    block = None
    for line in text.splitlines():
        if re.match(r'^\S.*:$', line):
            block = line[:-1].strip()
            continue
        if block is None or not line.startswith('  ') or line.startswith('   '):
            continue  # not an entry: a description wrapped onto its own line starts further in
        entry = re.split(r'\s{2,}', line.strip())[0]
        if block == 'Options' or entry.startswith('-'):
            for part in entry.split(','):
                word = part.strip().split(' ')[0]
                if re.fullmatch(r'--?[A-Za-z0-9][\w-]*', word):
                    options.append(word)
        elif block == 'Subcommands':
            word = entry.split(' ')[0]
            if re.fullmatch(r'[a-z][\w-]*', word):
                subcommands.append(word)
    return options, subcommands


def sections_of(markdown):
    """[(level, heading, body)] of a Markdown text (code blocks are body, never headings)."""
    sections = []
    level, heading, body = 0, '', []
    fenced = False
    for line in markdown.splitlines():
        if line.startswith('```'):
            fenced = not fenced
        match = None if fenced else re.match(r'^(#+)\s+(.*)', line)
        if match:
            sections.append((level, heading, '\n'.join(body)))
            level, heading, body = len(match.group(1)), match.group(2), []
        else:
            body.append(line)
    sections.append((level, heading, '\n'.join(body)))
    return sections


def command_sections(sections):
    """{command path: its own text, up to the next heading} of the sections headed `kiln PATH`."""
    found = {}
    for _, heading, body in sections:
        words = heading.replace('`', '').split()
        if len(words) >= 2 and words[0] == 'kiln' and all(re.fullmatch(r'[a-z][\w-]*', w) for w in words[1:]):
            found[tuple(words[1:])] = body
    return found


def documented_options(text):
    """The options in the first cell of the table rows of `text`."""
    options = set()
    for line in text.splitlines():
        cells = line.strip().split('|')
        if line.lstrip().startswith('|') and len(cells) >= 3:
            options.update(re.findall(r'`(--?[A-Za-z0-9][\w-]*)`', cells[1]))
    return options


def check_cli(kiln, root, missing):
    doc = root / 'docs' / 'cli.md'
    if not doc.is_file():
        missing.append(f'{doc} does not exist')
        return
    markdown = doc.read_text()
    sections = command_sections(sections_of(markdown))
    top_options, commands = parse_help(help_of(kiln, []))
    if not commands:
        missing.append('kiln --help lists no commands: its format changed, fix parse_help')
    everywhere = documented_options(markdown)
    for option in top_options + sorted(EVERY_COMMAND_OPTIONS - set(top_options)):
        if option not in everywhere:
            missing.append(f'docs/cli.md: no table row for the option {option} of kiln')
    seen = set()
    checked_options = 0
    queue = [(command,) for command in commands]
    while queue:
        path = queue.pop(0)
        seen.add(path)
        shown = 'kiln ' + ' '.join(path)
        options, subcommands = parse_help(help_of(kiln, list(path)))
        queue += [path + (sub,) for sub in subcommands]
        if path not in sections:
            missing.append(f'docs/cli.md: no section headed `{shown}`')
            continue
        rows = documented_options(sections[path])
        for option in options:
            checked_options += 1
            # -h/--help: checked once, as options of kiln itself.
            if option not in EVERY_COMMAND_OPTIONS and option not in rows:
                missing.append(f'docs/cli.md, `{shown}`: no table row for the option {option}')
        # The other way round: an option row for an option the command no longer has.
        for option in sorted(rows - set(options)):
            missing.append(f'docs/cli.md, `{shown}`: a row for {option}, which `{shown} --help` does not list')
    # A section for a command kiln no longer lists (or never listed, as `kiln bench`, which is
    # another program's: docs/performance.md).
    for path in sorted(set(sections) - seen):
        missing.append(f'docs/cli.md: a section for `kiln {" ".join(path)}`, which `kiln --help` does not list')
    print(f'cli: {len(seen)} commands, {checked_options} options checked')


def test_configuration_doc(source_root):
    missing = []
    check_configuration(source_root, missing)
    assert not missing, f'{len(missing)} missing or stale:\n' + '\n'.join(missing)


def test_cli_doc(kiln, source_root):
    missing = []
    check_cli(kiln, source_root, missing)
    assert not missing, f'{len(missing)} missing or stale:\n' + '\n'.join(missing)
