"""Drop-ins for vLLM's and SGLang's per-token-group quantizers (docs/python.md, "Drop-in for vLLM
and SGLang"): `kiln.compat.vllm` and `kiln.compat.sglang` hold functions with the upstream names,
signatures and output geometry, each a thin call of kiln's op, and an `install()` that puts them in
place of the upstream functions in an already imported vllm or sglang."""

import inspect
import sys
import warnings

from .._variant import GROUP_SIZES


def check_group(caller: str, group_size, k: int) -> None:
    """Group sizes upstream quantizes and kiln's kernels do not: NotImplementedError naming them
    (kiln never falls back to the upstream kernel). Other values go on to kiln's own checks."""
    if isinstance(group_size, int) and not isinstance(group_size, bool) and group_size not in GROUP_SIZES:
        what = f"group_size {group_size}"
        if group_size == k:
            what += " (whole-row per-token quantization, group_size == x.shape[-1])"
        raise NotImplementedError(f"{caller}: {what} has no kiln kernel; kiln's group sizes are "
                                  f"{', '.join(map(str, GROUP_SIZES))}")


def _parameters(fn):
    try:
        return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        return None


def install(package: str, replacements) -> list:
    """Replace, in every imported module of `package` (sys.modules; nothing is imported), each
    attribute that holds one of the upstream functions named like a replacement, whatever the
    attribute's own name (aliases and `from ... import` copies included). Why the signature test:
    upstream has other functions of the same name with other parameters, which must stay.
    Returns the "module.attribute" names replaced."""
    caller = f"kiln.compat.{package}.install"
    modules = [(name, module) for name, module in list(sys.modules.items())
               if module is not None and (name == package or name.startswith(package + "."))]
    if not modules:
        warnings.warn(f"{caller}: {package} is not imported; nothing replaced", stacklevel=3)
        return []
    wanted = {fn.__name__: fn for fn in replacements}
    originals = {}  # id -> (upstream function, replacement)
    installed = False  # by an earlier call
    for name, module in modules:
        for attr, fn in wanted.items():
            found = vars(module).get(attr)
            installed = installed or found is fn
            if (found is None or found is fn or getattr(found, "__name__", None) != attr
                    or not str(getattr(found, "__module__", "")).startswith(package)):
                continue
            if _parameters(found) != _parameters(fn):
                warnings.warn(f"{caller}: {name}.{attr} takes {inspect.signature(found)}, not "
                              f"{inspect.signature(fn)}; left as it is", stacklevel=3)
                continue
            originals[id(found)] = (found, fn)
    replaced = []
    for name, module in modules:
        for attr, value in list(vars(module).items()):
            hit = originals.get(id(value))
            if hit is not None and hit[0] is value:
                setattr(module, attr, hit[1])
                replaced.append(f"{name}.{attr}")
    if not replaced and not installed:
        warnings.warn(f"{caller}: none of {', '.join(wanted)} found in the imported {package} modules; "
                      f"nothing replaced", stacklevel=3)
    return replaced
