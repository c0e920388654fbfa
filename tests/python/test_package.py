"""The package as installed: import, version, the kiln program inside it, plain-data diagnostics."""
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys

import kiln


def run(*args):
    return subprocess.run([sys.executable, "-m", "kiln", *args], capture_output=True, text=True)


def test_version_is_the_librarys():
    assert kiln.__version__ == importlib.metadata.version("kiln")


def test_the_installed_package_is_tested():
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "kiln")
    assert not os.path.samefile(os.path.dirname(kiln.__file__), source), kiln.__file__


def test_package_carries_program_and_extension():
    folder = os.path.dirname(kiln.__file__)
    assert os.access(os.path.join(folder, "kiln"), os.X_OK)
    assert any(name.startswith("_kiln.") and name.endswith(".so") for name in os.listdir(folder))


def test_python_m_kiln_info_json_is_the_programs():
    done = run("info", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["kiln"] == kiln.__version__
    assert "devices" in data and "nvrtc" in data


def test_python_m_kiln_list():
    done = run("list")
    assert done.returncode == 0, done.stderr
    assert "per_token_group_quant_fp8" in done.stdout


def test_python_m_kiln_usage_error_exits_2():
    done = run("pick", "--m", "0", "--k", "128")
    assert done.returncode == 2
    assert "--m" in done.stderr


def test_python_m_kiln_unknown_command_exits_2():
    assert run("no-such-command").returncode == 2


def test_info_is_plain_data():
    data = kiln.info()
    assert isinstance(data, dict)
    assert data["kiln"] == kiln.__version__
    assert isinstance(data["nvrtc"]["archs"], list) and data["nvrtc"]["archs"]
    json.dumps(data)


def test_devices_is_a_list_of_dicts():
    found = kiln.devices()
    assert isinstance(found, list)
    for device in found:
        assert {"ordinal", "name", "compute_capability", "sm_count", "target"} <= set(device)


def test_cache_stats_is_plain_data(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    stats = kiln.cache_stats()
    assert set(stats) == {"disk", "process"}
    assert isinstance(stats["process"], dict)
    json.dumps(stats)


def test_process_counters_have_every_tier_with_the_program_s_names():
    # In a child: asking for device 0's counters makes its Service, which would then show up in
    # this process's cache_stats() for the other tests.
    code = ("import json, kiln; from kiln import _kiln; "
            "print(json.dumps({'process': _kiln.counters(0), 'program': kiln.info()['counters']}))")
    # Why no remote tier: its counters must then all read 0. The memory and disk ones need not:
    # on a GPU the Service's first use prefetches (compiles or loads) the device's modules.
    env = {name: value for name, value in os.environ.items() if not name.startswith("KILN_REMOTE_CACHE")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    process, program = found["process"], found["program"]
    assert set(process) == {"memory", "disk", "remote"}
    assert set(process["remote"]) == set(program["remote"])
    assert {"memory_hits", "compile_ms", "load_refused", "failures"} <= set(process["memory"])
    assert {"disk_misses", "lock_failures", "store_failures"} <= set(process["disk"])
    assert all(type(value) in (int, float) and value >= 0 for tier in process.values() for value in tier.values())
    assert all(value == 0 for value in process["remote"].values())


def test_package_carries_the_op_module_on_the_stable_abi():
    # kiln._kiln_ops is always built (torch >= 2.10 headers are a build requirement) and uses only
    # PyTorch's C shim: no symbol of libtorch's C++ API (c10::, at::, torch:: mangled names).
    folder = os.path.dirname(kiln.__file__)
    found = [name for name in os.listdir(folder) if name.startswith("_kiln_ops.") and name.endswith(".so")]
    assert found, os.listdir(folder)
    nm = shutil.which("nm")
    assert nm is not None, "nm (binutils) reads the module's undefined symbols"
    done = subprocess.run([nm, "-D", "--undefined-only", os.path.join(folder, found[0])], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    prefixes = tuple(f"_ZN{const}{name}" for const in ("", "K") for name in ("3c10", "2at", "5torch"))
    cxx_api = [line for line in done.stdout.splitlines() if line.split()[-1].startswith(prefixes)]
    assert not cxx_api, cxx_api
