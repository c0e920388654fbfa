"""What libkiln.so exports: kiln's own API and nothing else.

Every defined dynamic symbol must be a C function of kiln.h (`kiln_*`), a name in namespace kiln
(mangled `_ZN[qualifiers]4kiln...`), or the type info, type name, vtable or VTT of a kiln type;
plus the version node `KILN_1` that the version script defines. Everything kiln.h declares must be
there. Classifying by the mangled name is exact (the outermost scope comes first); the demangled
text is not, because a function template's demangled name starts with its return type:
`kiln::KernelSource* std::__do_uninit_copy<...>` is in namespace std.

Usage: test_exports.py LIBKILN_SO KILN_H B_SANITIZE
"""
import re
import shutil
import subprocess
import sys

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


def main():
    library, header, sanitize = sys.argv[1], sys.argv[2], sys.argv[3]
    nm = shutil.which('nm')
    if nm is None:
        print('nm (binutils) is not installed', file=sys.stderr)
        return 1
    mangled = defined_symbols(nm, library, demangle=False)
    demangled = defined_symbols(nm, library, demangle=True)
    if len(mangled) != len(demangled):
        print(f'nm -D and nm -DC disagree: {len(mangled)} vs {len(demangled)} symbols', file=sys.stderr)
        return 1
    sanitized = sanitize not in ('', 'none')
    foreign, names = [], set()
    for (kind, name), (_, readable) in zip(mangled, demangled):
        bare = name.split('@')[0]
        names.add(bare)
        if bare == VERSION_NODE and kind == 'A':
            continue
        if KILN_OWN.match(bare):
            continue
        if sanitized and SANITIZER_RUNTIME.match(bare):
            continue
        foreign.append(f'{kind} {name}  ({readable})')

    functions = declared_functions(header)
    missing = [f for f in functions if f not in names]
    failures = 0
    if foreign:
        failures += 1
        print(f'{len(foreign)} exported symbols are not kiln API:', file=sys.stderr)
        for row in foreign:
            print('  ' + row, file=sys.stderr)
    if len(functions) < 10:
        failures += 1
        print(f'found only {len(functions)} functions in {header}: {functions}', file=sys.stderr)
    if missing:
        failures += 1
        print(f'kiln.h functions not exported: {missing}', file=sys.stderr)
    cxx = [n for n in names if n.startswith('_ZN4kiln') or n.startswith('_ZNK4kiln')]
    typeinfo = [n for n in names if n.startswith('_ZTIN4kiln')]
    if not cxx or not typeinfo:
        failures += 1
        print(f'the C++ API is missing: {len(cxx)} kiln:: names, {len(typeinfo)} kiln type infos', file=sys.stderr)
    if failures == 0:
        print(f'ok: {len(names)} exported symbols, all kiln API; {len(functions)} kiln.h functions present; '
              f'{len(cxx)} kiln:: names, {len(typeinfo)} type infos')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
