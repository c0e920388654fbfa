#!/usr/bin/env python3
"""Merge one device run's results into <date>-<gpu>.md and .json (bench/run_device.sh writes them to $OUT).

  merge_results.py --kiln bench.json [--triton triton.json] [--triton-jit triton_jit.json]
                   [--cupy cupy.json] [--smi nvidia-smi.csv] --out-dir DIR

kiln's JSON (kiln-bench --json) is required; a peer whose file is missing or empty is reported as
not run. The markdown holds the environment (date, GPU, driver and NVRTC versions), the targets,
every kiln table, Triton's kernel times next to kiln's arms, and the JIT peers next to kiln's JIT.
"""
import argparse
import json
import pathlib
import re
import sys


def load(path):
    if not path:
        return None
    p = pathlib.Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return None
    text = p.read_text().strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:  # a peer that printed something before its JSON line
        return json.loads(text.splitlines()[-1])


def cell(value):
    return str(value).replace("|", "\\|")


def md_table(columns, rows):
    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def num(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def smi_fields(text):
    """name, driver_version, memory.total, clocks.max.sm from nvidia-smi's CSV (first GPU)."""
    if not text:
        return {}
    parts = [p.strip() for p in text.strip().splitlines()[0].split(",")]
    keys = ["name", "driver_version", "memory_total", "sm_clock_max"]
    return dict(zip(keys, parts))


def environment(kiln, smi, triton, cupy):
    env = dict(kiln.get("environment", {}))
    env["nvidia_smi"] = smi
    if triton:
        env["triton"], env["torch"] = triton.get("triton"), triton.get("torch")
    if cupy:
        env["cupy"], env["cupy_nvrtc"] = cupy.get("cupy"), cupy.get("nvrtc")
    return env


def arms_with_triton(table, triton):
    columns = list(table["columns"])
    rows = [list(r) for r in table["cells"]]
    if not triton:
        return columns, rows
    by_shape = {(r["m"], r["k"]): r for r in triton.get("rows", [])}
    columns += ["triton us", "triton GB/s", "triton/kiln pick"]
    for row, record in zip(rows, table["rows"]):
        peer = by_shape.get((record["m"], record["k"]))
        picked = record.get("twin_us") if record.get("pick") == "twin" else record.get("shared_us")
        if peer is None or picked is None:
            row += ["-", "-", "-"]
            continue
        row += [num(peer["median_us"], 2), num(peer["gbps"], 0), num(peer["median_us"] / picked, 2) + "x"]
    return columns, rows


def jit_peers(kiln_tables, triton_jit, cupy):
    rows = []
    jit = {r["variant"]: r for r in kiln_tables.get("jit", {}).get("rows", [])}
    for variant, label in (("cold_driver_first", "cold"), ("warm", "warm")):
        r = jit.get(variant)
        if r:
            rows.append(["kiln (both handles)", label, num(r.get("after_driver_ms"), 2), num(r.get("spawn_to_handles_ms"), 1),
                         num(r.get("process_wall_ms"), 1)])
    if cupy:
        for label in ("cold", "warm"):
            r = cupy.get(label, {})
            rows.append([f"CuPy RawModule ({cupy.get('modules', '?')} modules)", label, num(r.get("first_function_ms"), 2),
                         num(r.get("process_to_function_ms"), 1), num(r.get("process_wall_ms"), 1)])
    else:
        rows.append(["CuPy RawModule", "not run", "-", "-", "-"])
    if triton_jit:
        for label in ("cold", "warm"):
            r = triton_jit.get(label, {})
            rows.append(["Triton (first call, incl. run)", label, num(r.get("first_call_ms"), 2),
                         num(r.get("process_to_result_ms"), 1), num(r.get("process_wall_ms"), 1)])
    else:
        rows.append(["Triton", "not run", "-", "-", "-"])
    columns = ["peer", "cache", "in process, driver up: ms to handles", "process start to handles ms", "process wall ms"]
    return columns, rows


ORDER = ["ceiling", "arms", "decode", "floor", "jit", "launch", "host", "disk_cache"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--triton")
    ap.add_argument("--triton-jit")
    ap.add_argument("--cupy")
    ap.add_argument("--smi")
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()
    kiln = load(args.kiln)
    if kiln is None:
        sys.exit(f"merge_results: no kiln results in {args.kiln}")
    triton, triton_jit, cupy = load(args.triton), load(args.triton_jit), load(args.cupy)
    smi_text = pathlib.Path(args.smi).read_text() if args.smi and pathlib.Path(args.smi).is_file() else ""
    smi = smi_fields(smi_text)
    env = environment(kiln, smi, triton, cupy)

    date = str(env.get("date", "unknown"))[:10]
    gpu = env.get("gpu") or smi.get("name") or "no GPU"
    kind = re.search(r"\b(H100|H200)\b", gpu)
    slug = kind.group(1).lower() if kind else (re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "nogpu")
    stem = f"{date}-{slug}"

    out = [f"# kiln-bench, {date}, {gpu}", ""]
    facts = [
        ("date (UTC)", env.get("date")),
        ("GPU", f"{gpu} (compute capability {env.get('compute_capability', '?')}, {env.get('sm_count', '?')} SMs, "
                f"L2 {int(env.get('l2_bytes', 0)) / 2**20:.0f} MiB, target {env.get('target', '?')})"),
        ("driver", f"{smi.get('driver_version', env.get('driver_text') or '?')} (CUDA driver API {env.get('driver_api')})"),
        ("NVRTC", env.get("nvrtc")),
        ("kiln", f"{env.get('kiln')}, quick run: {'yes' if env.get('quick') else 'no'}, "
                 f"KILN_FP8_ACT_QUANT_HOPPER={int(bool(env.get('lever_KILN_FP8_ACT_QUANT_HOPPER')))}"),
        ("Triton / PyTorch", f"{env.get('triton')} / {env.get('torch')}" if triton else "not run"),
        ("CuPy (its NVRTC)", f"{env.get('cupy')} ({env.get('cupy_nvrtc')})" if cupy else "not run"),
        ("host CPUs", env.get("cpus")),
    ]
    if env.get("error"):
        facts.append(("kiln-bench error", env["error"]))
    out += [md_table(["", ""], facts), ""]
    for part, reason in kiln.get("skipped", {}).items():
        out += [f"Skipped: {part}: {reason}", ""]

    out += ["## Targets", "", md_table(["target", "measured", "limit", "met"],
                                       [[t["target"], t["measured"], t["limit"],
                                         "-" if t["met"] is None else ("yes" if t["met"] else "no")]
                                        for t in kiln.get("targets", [])]), ""]
    tables = kiln.get("tables", {})
    for table_id in ORDER + sorted(set(tables) - set(ORDER)):
        table = tables.get(table_id)
        if table is None:
            continue
        columns, rows = (arms_with_triton(table, triton) if table_id == "arms"
                         else (table["columns"], table["cells"]))
        out += [f"## {table_id}", "", table["title"], "", md_table(columns, rows), ""]
        out += [f"- {note}" for note in table.get("notes", [])]
        if table_id == "arms" and triton:
            out += ["- Triton: vLLM's per_token_group_quant_fp8 kernel, timed the same way (batches of 10 "
                    "launches between event pairs behind a GPU sleep, inputs rotated over 2x L2); triton/kiln pick > 1 means kiln is faster"]
        if table_id == "jit":
            columns, rows = jit_peers(tables, triton_jit, cupy)
            out += ["", "JIT peers, each in fresh processes (kiln: medians of the table above):", "",
                    md_table(columns, rows)]
        out.append("")

    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.md").write_text("\n".join(out))
    merged = {"environment": env, "kiln": kiln, "triton": triton, "triton_jit": triton_jit, "cupy": cupy,
              "nvidia_smi": smi_text}
    (out_dir / f"{stem}.json").write_text(json.dumps(merged, indent=2) + "\n")
    print(f"wrote {out_dir / (stem + '.md')} and {stem}.json")


if __name__ == "__main__":
    main()
