"""What libkiln.so exports: kiln's public API and nothing else (docs/architecture.md, "What the
library exports").

Every defined dynamic symbol must be a C function of kiln.h (`kiln_*`), a name in namespace kiln
(mangled `_ZN[qualifiers]4kiln...`), or the type info, type name, vtable or VTT of a kiln type;
plus the version node `KILN_1` that the version script defines. Everything kiln.h declares must be
there. Classifying by the mangled name is exact (the outermost scope comes first); the demangled
text is not, because a function template's demangled name starts with its return type:
`kiln::KernelSource* std::__do_uninit_copy<...>` is in namespace std.

And each of those must be something an embedder can name: a `kiln_*` function that kiln.h declares,
or a C++ name whose class or function, and member, the public headers (include/kiln) declare. An
internal part (the caches, the driver table, the compiler) exported by mistake fails here.
"""
import re
import shutil
import subprocess

import pytest

KILN_OWN = re.compile(r'^(kiln_\w+|_ZN[rVKRO]{0,3}4kiln\w*|_ZT[ISVT]N4kiln\w*)$')
# Why tolerated, and only in sanitizer builds: a sanitizer runtime piece linked into the library
# would export these. With GCC and clang (address, undefined, thread, fuzzer-no-link) none appear,
# because kiln.map's `local: *` hides what the instrumentation adds and the runtimes live in the
# executable or in libasan.so/libtsan.so; the allowance guards against toolchains that differ.
SANITIZER_RUNTIME = re.compile(r'^(__asan_|__ubsan_|__tsan_|__lsan_|__msan_|__sanitizer_)\w*$')
VERSION_NODE = 'KILN_1'


def defined_symbols(nm, library, demangle):
    args = [nm, '-D', '--defined-only'] + (['-C'] if demangle else []) + [library]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3:
            rows.append((parts[1], parts[2]))
    return rows


def code_of(header):
    """The header's text without comments and preprocessor lines."""
    text = open(header, encoding='utf-8').read()
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    return re.sub(r'^\s*#[^\n]*', ' ', text, flags=re.M)


def declared_functions(header):
    return sorted(set(re.findall(r'\b(kiln_[a-z0-9_]+)\s*\(', code_of(header))))


SPECIAL = re.compile(r'^(typeinfo name for|typeinfo for|vtable for|VTT for|construction vtable for) ')


def qualified_name(demangled):
    """`kiln::ops::GroupQuant::grid` of `kiln::ops::GroupQuant::grid(...) const`: the name before the
    parameter list, past a template's return type, without ABI tags and template arguments."""
    text = re.sub(r'\[abi:[^\]]*\]', '', SPECIAL.sub('', demangled.split('@')[0]))
    depth, start, end = 0, 0, len(text)
    for i, c in enumerate(text):
        if c == '<':
            depth += 1
        elif c == '>':
            depth -= 1
        elif depth == 0 and c == ' ':
            start = i + 1
        elif depth == 0 and c == '(':
            end = i
            break
    name = text[start:end]
    while '<' in name:
        name = re.sub(r'<[^<>]*>', '', name)
    return name


def undeclared(qualified, public):
    """What of `kiln::...` the public headers do not declare: a class or function after the
    namespaces, and each member name after it; empty when all are there."""
    parts = qualified.split('::')
    if parts[0] != 'kiln':
        return [qualified]
    parts = parts[2:] if len(parts) > 2 and parts[1] == 'ops' else parts[1:]
    if not parts:
        return [qualified]
    missing = []
    outer = parts[0]
    if not re.search(rf'\b(class|struct|enum|union)\s+(\w+\s+)*{re.escape(outer)}\b|\b{re.escape(outer)}\s*\(',
                     public):
        missing.append(outer)
    for member in parts[1:]:
        if not re.search(rf'\b{re.escape(member.lstrip("~"))}\b', public):
            missing.append(member)
    return missing


@pytest.fixture(scope='module')
def exported(kiln_library):
    """(kind, mangled name, demangled name) of every defined dynamic symbol of libkiln.so."""
    nm = shutil.which('nm')
    assert nm is not None, 'nm (binutils) is not installed'
    mangled = defined_symbols(nm, kiln_library, demangle=False)
    demangled = defined_symbols(nm, kiln_library, demangle=True)
    assert len(mangled) == len(demangled), f'nm -D and nm -DC disagree: {len(mangled)} vs {len(demangled)} symbols'
    return [(kind, name, readable) for (kind, name), (_, readable) in zip(mangled, demangled)]


def test_only_kiln_api_is_exported(exported, b_sanitize):
    sanitized = b_sanitize not in ('', 'none')
    foreign = []
    for kind, name, readable in exported:
        bare = name.split('@')[0]
        if bare == VERSION_NODE and kind == 'A':
            continue
        if KILN_OWN.match(bare):
            continue
        if sanitized and SANITIZER_RUNTIME.match(bare):
            continue
        foreign.append(f'{kind} {name}  ({readable})')
    assert not foreign, f'{len(foreign)} exported symbols are not kiln API:\n' + '\n'.join(foreign)


def test_kiln_h_functions_exported(exported, source_root):
    header = source_root / 'include' / 'kiln' / 'kiln.h'
    names = {name.split('@')[0] for _, name, _ in exported}
    functions = declared_functions(header)
    assert len(functions) >= 10, f'found only {len(functions)} functions in {header}: {functions}'
    missing = [f for f in functions if f not in names]
    assert not missing, f'kiln.h functions not exported: {missing}'


def test_cxx_api_exported(exported):
    names = {name.split('@')[0] for _, name, _ in exported}
    cxx = [n for n in names if n.startswith('_ZN4kiln') or n.startswith('_ZNK4kiln')]
    typeinfo = [n for n in names if n.startswith('_ZTIN4kiln')]
    assert cxx and typeinfo, f'the C++ API is missing: {len(cxx)} kiln:: names, {len(typeinfo)} kiln type infos'


def test_every_export_is_public(exported, source_root):
    """Each exported name is one that include/kiln declares: kiln_* in kiln.h, C++ names by class
    or function and member in include/kiln/**."""
    include = source_root / 'include' / 'kiln'
    c_functions = set(declared_functions(include / 'kiln.h'))
    public = '\n'.join(code_of(h) for h in sorted(include.rglob('*.hpp')))
    problems = []
    for kind, name, readable in exported:
        bare = name.split('@')[0]
        if bare == VERSION_NODE and kind == 'A':
            continue
        if bare.startswith('kiln_'):
            if bare not in c_functions:
                problems.append(f'{bare}: not a function of kiln.h')
            continue
        if not KILN_OWN.match(bare):
            continue  # test_only_kiln_api_is_exported names it
        missing = undeclared(qualified_name(readable), public)
        if missing:
            problems.append(f'{readable.split("@")[0]}: {", ".join(missing)} not in include/kiln')
    assert not problems, f'{len(problems)} exported symbols are not public API:\n' + '\n'.join(problems)


def test_qualified_name():
    assert qualified_name('kiln::ops::GroupQuant::grid(kiln::ops::QuantVariant const&, unsigned long) const@@KILN_1') \
        == 'kiln::ops::GroupQuant::grid'
    assert qualified_name('kiln::Target::name[abi:cxx11]() const') == 'kiln::Target::name'
    assert qualified_name('typeinfo for kiln::Error') == 'kiln::Error'
    assert qualified_name('kiln::KernelSource* std::__do_uninit_copy<kiln::KernelSource const*>(int)') \
        == 'std::__do_uninit_copy'
    assert qualified_name('void kiln::visit<std::pair<int, int> >(int)') == 'kiln::visit'
    public = 'class KILN_API Service { Service(int); ~Service(); }; int parse_target(int);'
    assert undeclared('kiln::Service::~Service', public) == []
    assert undeclared('kiln::parse_target', public) == []
    assert undeclared('kiln::RemoteCache::get', public) == ['RemoteCache', 'get']
    assert undeclared('kiln::driver::load', public) == ['driver', 'load']
