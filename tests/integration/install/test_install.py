"""`meson install` into a staging folder installs the public API only, and a program outside the
tree that includes kiln/service.hpp and the op header builds against it through pkg-config and runs."""
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest

PUBLIC = {
    "kiln/counters.hpp", "kiln/error.hpp", "kiln/export.hpp", "kiln/gpu_backend.hpp", "kiln/kernel_handle.hpp",
    "kiln/kiln.h", "kiln/service.hpp", "kiln/target.hpp", "kiln/version.hpp",
    "kiln/ops/fp8_act_quant.hpp", "kiln/ops/group_quant.hpp", "kiln/ops/group_quant_pick.hpp",
    "kiln/ops/quant_launch_options.hpp",
}


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        pytest.fail(f"{shlex.join(cmd)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def test_install(build_root, source_root, cxx, b_sanitize):
    build, source, sanitize = build_root, source_root, b_sanitize
    with tempfile.TemporaryDirectory(prefix="kiln-install-") as stage:
        run(["meson", "install", "-C", build, "--no-rebuild", "--destdir", stage, "--quiet"])
        root = Path(stage)
        include_dirs = [p for p in root.rglob("include") if (p / "kiln").is_dir()]
        assert len(include_dirs) == 1, f"expected one include/kiln, found {include_dirs}"
        include = include_dirs[0]
        installed = {str(p.relative_to(include)) for p in include.rglob("*") if p.is_file()}
        assert installed == PUBLIC, f"installed headers differ from the public API: " \
            f"extra {sorted(installed - PUBLIC)}, missing {sorted(PUBLIC - installed)}"

        # No public header may reach outside include/: its quoted includes are public headers.
        for header in sorted(installed):
            for name in re.findall(r'^#include "([^"]+)"', (include / header).read_text(), re.M):
                assert name in PUBLIC, f"{header} includes \"{name}\", which is not a public header"

        pc_files = list(root.rglob("kiln.pc"))
        assert len(pc_files) == 1, f"expected one kiln.pc, found {pc_files}"
        env = dict(os.environ, PKG_CONFIG_PATH=str(pc_files[0].parent), PKG_CONFIG_SYSROOT_DIR=stage)
        # kiln's own dependencies are private: an embedder's compile and link need only libkiln.
        requires = run(["pkg-config", "--print-requires", "kiln"], env=env).split()
        assert requires == [], f"kiln.pc has public requirements: {requires}"
        flags = run(["pkg-config", "--cflags", "--libs", "kiln"], env=env).split()
        libdir = next(f[2:] for f in flags if f.startswith("-L"))
        extra = [f"-fsanitize={sanitize}"] if sanitize != "none" else []
        program = root / "embedder"
        run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", *extra,
             str(Path(source) / "tests/integration/install/embedder.cpp"), "-o", str(program), *flags])
        output = run([str(program)], env=dict(os.environ, LD_LIBRARY_PATH=libdir, KILN_CACHE="0"))
        assert "refused: invalid argument 'k'" in output, output
