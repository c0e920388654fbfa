"""What the pytest tests under tests/ share: the programs under test and the build's settings, named
on the command line (the meson.build files pass them; by hand:
`pytest-3 tests/cli/test_kiln_dump.py --kiln build/tools/kiln`). A test that needs one it was not
given fails; it never skips."""
import os
import pathlib

import pytest

# fixture name: (command-line option, what it names, whether it is a path)
OPTIONS = {
    'kiln': ('--kiln', 'the kiln program (build/tools/kiln)', True),
    'kiln_bench': ('--kiln-bench', 'the benchmark program (build/bench/kiln-bench)', True),
    'deploy_test': ('--deploy-test', 'the test_deploy_no_nvrtc program', True),
    'gpu_main_probe': ('--gpu-main-probe', "test_gpu_main_probe, the GPU suite's main", True),
    'fake_init_fails': ('--fake-init-fails', 'the fake libcuda.so.1 whose cuInit fails', True),
    'fake_lacks_required': ('--fake-lacks-required', 'the fake libcuda.so.1 that lacks a required entry', True),
    'kiln_library': ('--kiln-library', 'the built libkiln.so', True),
    'build_root': ('--build-root', 'the Meson build folder', True),
    'cxx': ('--cxx', "the build's C++ compiler command", False),
    'b_sanitize': ('--b-sanitize', "the build's b_sanitize option (none, address, ...)", False),
}


def pytest_addoption(parser):
    group = parser.getgroup('kiln', 'the programs under test and the build')
    for option, what, _ in OPTIONS.values():
        group.addoption(option, help=what)


def option_fixture(name, option, what, is_path):
    @pytest.fixture(scope='session', name=name)
    def fixture(request):
        value = request.config.getoption(option)
        if not value:
            pytest.fail(f'{option} was not given: {what}', pytrace=False)
        return os.path.abspath(value) if is_path else value
    return fixture


for _name, (_option, _what, _is_path) in OPTIONS.items():
    globals()[_name] = option_fixture(_name, _option, _what, _is_path)


@pytest.fixture(scope='session')
def source_root():
    return pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope='session')
def clean_env():
    """The caller's environment without any KILN_* setting, so that a test sets exactly its own
    (copy it: `{**clean_env, 'KILN_...': ...}`)."""
    return {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}

