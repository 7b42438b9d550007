"""The GPU check's one-page summary (run by run_gpu_checks.sh).

Reads OUT/probe.json, OUT/phases.txt (pytest exit status per phase), the
phases' JUnit XML and OUT/bench.json; writes OUT/summary.md and prints it.
Exit status 0 only when set-up passed, every phase ran with pytest status 0
and no failure, and a GPU was used: on a GPU machine a skipped GPU test is a
failure (something the check should have run did not); with
GPU_CHECKS_ALLOW_NO_GPU=1 (argument 3) no GPU is allowed.

    python summarize.py OUT SECONDS ALLOW_NO_GPU
"""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ElementTree
from typing import Any

PHASES = ("gpu", "identity", "nvidia_compat")
GPU_PHASES = ("gpu", "nvidia_compat")


def load_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            return dict(json.load(f))
    except (OSError, ValueError):
        return {}


def results(xml_path: str) -> list[tuple[str, str, str]]:
    """(test id, PASS/FAIL/ERROR/SKIP, first line of the message)."""
    out: list[tuple[str, str, str]] = []
    root = ElementTree.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        outcome, message = "PASS", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "FAIL", "error": "ERROR", "skipped": "SKIP"}[child.tag]
                message = (child.get("message") or child.text or "").strip().splitlines()[0:1]
                message = message[0][:160] if message else ""
                break
        out.append((name, outcome, message))
    return out


def main() -> int:
    out, seconds, allow_no_gpu = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    probe = load_json(os.path.join(out, "probe.json"))
    bench = load_json(os.path.join(out, "bench.json"))
    statuses: dict[str, int] = {}
    try:
        for line in open(os.path.join(out, "phases.txt")):
            name, rc = line.split()
            statuses[name] = int(rc)
    except OSError:
        pass
    lines = ["# GPU check summary", ""]
    problems: list[str] = []
    setup = os.path.join(out, "setup.txt")
    if os.path.exists(setup):
        problems.append(open(setup).read().strip())
    devices = probe.get("cuda_devices", 0)
    drv = probe.get("driver", {})
    lines += [
        f"- GPU: {drv.get('nvidia_smi', 'unknown')}",
        f"- driver CUDA version: {drv.get('cuda_driver_api', drv.get('libcuda', 'unknown'))}",
        f"- Python {probe.get('python', '?')}, numpy {probe.get('numpy', '?')}, {probe.get('platform', '')}",
        f"- tritonserver {probe.get('tritonserver', '?')}",
        f"- core: {probe.get('core', '?')}",
        f"- allocator's CUDA runtime: {probe.get('allocator_cuda_runtime', '?')} ({devices} device(s))",
        f"- CuPy {probe.get('cupy', '?')} (runtime {probe.get('cupy_cuda_runtime', '-')}); "
        f"torch {probe.get('torch', '?')} (CUDA {probe.get('torch_cuda', '-')}, "
        f"available {probe.get('torch_cuda_available', '-')})",
        "- libcudart mapped in one process: " + (", ".join(probe.get("libcudart_mapped", [])) or "none"),
        "- libcuda mapped: " + (", ".join(probe.get("libcuda_mapped", [])) or "none"),
    ]
    for key in ("cupy_reads_our_memory", "our_runtime_reads_cupy_memory", "torch_reads_our_memory"):
        if key in probe:
            lines.append(f"- {key.replace('_', ' ')}: {probe[key]}")
            if probe[key] is not True:
                problems.append(f"{key}: {probe[key]}")
    if devices == 0:
        lines.append("- NO GPU: the GPU tests were skipped" + (" (allowed)" if allow_no_gpu else ""))
        if not allow_no_gpu:
            problems.append("no CUDA device seen by tritonserver")
    if bench:
        lines.append(f"- benchmark: {bench.get('summary', bench)}")
    lines += ["", "| phase | pass | fail | error | skip | pytest status |", "|---|---|---|---|---|---|"]
    per_test: list[str] = []
    reasons: dict[str, int] = {}
    for phase in PHASES:
        path = os.path.join(out, f"{phase}.xml")
        if not os.path.exists(path):
            if not problems or phase in statuses:
                problems.append(f"{phase}: no JUnit XML (status {statuses.get(phase, 'not run')})")
            lines.append(f"| {phase} | - | - | - | - | {statuses.get(phase, 'not run')} |")
            continue
        rows = results(path)
        count = {k: sum(1 for r in rows if r[1] == k) for k in ("PASS", "FAIL", "ERROR", "SKIP")}
        rc = statuses.get(phase, "?")
        lines.append(f"| {phase} | {count['PASS']} | {count['FAIL']} | {count['ERROR']} | {count['SKIP']} | {rc} |")
        if rc != 0 or count["FAIL"] or count["ERROR"] or not rows:
            problems.append(f"{phase}: pytest status {rc}, {count['FAIL']} failed, {count['ERROR']} errors")
        if devices > 0 and phase in GPU_PHASES and count["SKIP"]:
            problems.append(f"{phase}: {count['SKIP']} test(s) skipped on a GPU machine")
        for name, outcome, message in rows:
            if phase == "identity" and outcome == "PASS":
                continue
            note = ""
            if outcome == "SKIP":  # one reason is usually shared by many: numbered once
                reasons.setdefault(message, len(reasons) + 1)
                note = f"  (reason {reasons[message]})"
            elif outcome != "PASS":
                note = f"  -- {message}"
            per_test.append(f"{outcome:5} {name.removeprefix('tests.')}{note}")
        if phase == "identity" and count["PASS"]:
            per_test.append(f"PASS  ({count['PASS']} identity-model tests, listed in identity.xml)")
    verdict = "PASSED" if not problems else "FAILED"
    lines += ["", f"**{verdict}** in {seconds} s" + ("" if not problems else ": " + "; ".join(problems)),
              "", "## Per test (GPU phases in full; identity phase: all but passes)", "", "```", *per_test, "```"]
    if reasons:
        lines += ["", "Skip reasons:", *[f"{n}. {reason}" for reason, n in reasons.items()]]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
