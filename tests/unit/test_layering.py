"""The library's folders are layers, and every #include runs down them (docs/architecture.md#layers).

Each #include in src/ and include/kiln is resolved as the compiler does (beside the including file,
then src/, include/ and kernels_src/common/) and fails when the included file's layer is not one its
own layer may include: an edge up the order, or sideways between layers that stay apart (driver/
and cache/). A folder of src/ that LAYERS does not name fails too, so a new folder gets a place.

A failure lists one line per problem: file:line and the edge.
"""
import pathlib
import re

# The layers, lowest first: name, folder (from the source root), the layers it may include besides
# itself. docs/architecture.md "Layers" shows this table; change both together.
LAYERS = [
    ('api', 'include/kiln', set()),
    ('kernels', 'kernels_src/common', set()),
    ('base', 'src/base', {'api'}),
    ('jit', 'src/jit', {'api', 'base'}),
    ('cache', 'src/cache', {'api', 'base', 'jit'}),
    ('driver', 'src/driver', {'api', 'base'}),
    ('runtime', 'src/runtime', {'api', 'base', 'jit', 'cache', 'driver'}),
    # Why not runtime/: an op reaches its device only through the public GpuBackend (api).
    ('ops', 'src/ops', {'api', 'kernels', 'base', 'jit'}),
    # The files directly in src/ (service.cpp), not its folders.
    ('service', 'src', {'api', 'kernels', 'base', 'jit', 'cache', 'driver', 'runtime', 'ops'}),
    ('c_api', 'src/c_api', {'api', 'kernels', 'base', 'jit', 'cache', 'driver', 'runtime', 'ops', 'service'}),
]
INCLUDE_DIRS = ('src', 'include', 'kernels_src/common')
SCANNED = ('src', 'include/kiln')
SOURCE_SUFFIXES = ('.c', '.cc', '.cpp', '.h', '.hh', '.hpp', '.inl', '.cu', '.cuh')
INCLUDE = re.compile(r'\s*#\s*include\s*([<"])([^">]+)[">]')


def layer_of(rel):
    """The layer name of `rel` (a path from the source root), or None when no layer holds it."""
    parts = rel.parts
    if parts[0] == 'src':
        folder = 'src' if len(parts) == 2 else f'src/{parts[1]}'
    elif parts[:2] == ('include', 'kiln'):
        folder = 'include/kiln'
    elif parts[:2] == ('kernels_src', 'common'):
        folder = 'kernels_src/common'
    else:
        return None
    return next((name for name, path, _ in LAYERS if path == folder), None)


def resolve(root, including, text, quoted):
    """The file `#include` names, as a path from `root`, or None (a system or external header)."""
    candidates = [including.parent / text] if quoted else []
    candidates += [root / folder / text for folder in INCLUDE_DIRS]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve().relative_to(root)
    return None


def check_table(problems):
    """LAYERS itself runs one way: a layer may include only layers listed before it."""
    seen = set()
    for name, _, allowed in LAYERS:
        for later in sorted(allowed - seen):
            problems.append(f'LAYERS: {name} may include {later}, which is not below it')
        seen.add(name)


def check_folders(root, problems):
    known = {path for _, path, _ in LAYERS}
    for folder in sorted(p for p in (root / 'src').iterdir() if p.is_dir()):
        if f'src/{folder.name}' not in known:
            problems.append(f'src/{folder.name}/: a folder with no layer in LAYERS (tests/unit/test_layering.py)')


def check_includes(root, problems):
    allowed = {name: may for name, _, may in LAYERS}
    order = [name for name, _, _ in LAYERS]
    for scanned in SCANNED:
        for path in sorted((root / scanned).rglob('*')):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root)
            source = layer_of(rel)
            if source is None:
                continue  # its folder is reported by check_folders
            for number, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                quote, text = match.groups()
                target_path = resolve(root, path, text, quote == '"')
                if target_path is None:
                    if quote == '"':
                        problems.append(f'{rel}:{number}: #include "{text}" resolves to no file of the tree')
                    continue
                target = layer_of(target_path)
                if target == source or target in allowed[source]:
                    continue
                if target is None:
                    problems.append(f'{rel}:{number}: {source} -> {target_path} (#include "{text}"): '
                                    'a file outside every layer')
                    continue
                way = 'up' if order.index(target) > order.index(source) else 'sideways'
                may = ', '.join(sorted(allowed[source])) or 'nothing but itself'
                problems.append(f'{rel}:{number}: {source} -> {target} (#include "{text}") runs {way}; '
                                f'{source} may include {may}')


def problems_of(root):
    root = pathlib.Path(root).resolve()
    problems = []
    check_table(problems)
    check_folders(root, problems)
    check_includes(root, problems)
    return problems


def test_includes_run_down_the_layers(source_root):
    problems = problems_of(source_root)
    assert not problems, '\n'.join(problems + ['(docs/architecture.md#layers)'])
