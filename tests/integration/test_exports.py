"""What libkiln.so exports: kiln's own API and nothing else.

Every defined dynamic symbol must be a C function of kiln.h (`kiln_*`), a name in namespace kiln
(mangled `_ZN[qualifiers]4kiln...`), or the type info, type name, vtable or VTT of a kiln type;
plus the version node `KILN_1` that the version script defines. Everything kiln.h declares must be
there. Classifying by the mangled name is exact (the outermost scope comes first); the demangled
text is not, because a function template's demangled name starts with its return type:
`kiln::KernelSource* std::__do_uninit_copy<...>` is in namespace std.
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


def declared_functions(header):
    text = open(header, encoding='utf-8').read()
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'^\s*#[^\n]*', ' ', text, flags=re.M)
    return sorted(set(re.findall(r'\b(kiln_[a-z0-9_]+)\s*\(', text)))


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
