"""The GPU check's one-page summary (run by run_gpu_checks.sh).

Reads OUT/probe.json, OUT/bench.json, the pytest phases' JUnit XML, OUT/log.txt
(pytest -v lines: results of a phase whose XML is missing, and the test that
was running when a phase crashed or was stopped) and STATE/phases.txt
("NAME STATUS [hung]" per phase) / STATE/setup.txt; writes OUT/summary.md and
prints it. Exit status 0 only when set-up passed, every phase ran with status
0 and no failure, and a GPU was used: on a GPU machine a skipped GPU test is a
failure (something the check should have run did not); with
GPU_CHECKS_ALLOW_NO_GPU=1 (argument 4) no GPU is allowed.

    python summarize.py OUT STATE SECONDS ALLOW_NO_GPU
"""

from __future__ import annotations

import json
import os
import re
import sys
import xml.etree.ElementTree as ElementTree
from typing import Any

PHASES = ("probe", "gpu", "identity", "nvidia_compat", "triton_log", "bench", "gpu_metrics")
PYTEST_PHASES = ("gpu", "identity", "nvidia_compat")
GPU_PHASES = ("gpu", "nvidia_compat")
# Probe results that must be True on a GPU machine.
PROBE_CHECKS = ("our_runtime_round_trip", "cupy_reads_our_memory", "our_runtime_reads_cupy_memory",
                "torch_reads_our_memory")
# "path.py::test[id] PASSED  [ 5%]" (ids may hold spaces), or the name alone
# while the test runs (whatever it printed may follow on that line).
VERBOSE_LINE = re.compile(r"^(\S+\.py::.+?)(?: (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: +\[ *\d+%\])?)?\s*$")


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
                lines = (child.get("message") or child.text or "").strip().splitlines()[0:1]
                message = lines[0][:160] if lines else ""
                break
        out.append((name, outcome, message))
    return out


def phase_log(log: str, phase: str) -> list[str]:
    """The lines log.txt holds for a pytest phase's section."""
    lines: list[str] = []
    inside = False
    for line in log.splitlines():
        if line.startswith("==== "):
            inside = line.startswith(f"==== Tests: {phase} (")
            continue
        if inside:
            lines.append(line)
    return lines


def verbose_results(lines: list[str]) -> tuple[list[tuple[str, str, str]], str | None]:
    """Results from pytest -v lines, and the test named last with no result
    (the one running when the phase ended), if any."""
    rows: list[tuple[str, str, str]] = []
    running = None
    outcome_of = {"PASSED": "PASS", "FAILED": "FAIL", "ERROR": "ERROR", "SKIPPED": "SKIP",
                  "XFAIL": "SKIP", "XPASS": "PASS"}
    for line in lines:
        match = VERBOSE_LINE.match(line)
        if not match:
            # A result printed apart from its name (output came in between).
            word = line.split(" ", 1)[0]
            if running and word in outcome_of:
                rows.append((running, outcome_of[word], "from log.txt"))
                running = None
            continue
        name, outcome = match.groups()
        name = name.split(" Timeout (")[0]  # pytest's faulthandler_timeout dump follows the name
        if outcome is None:
            running = name
        else:
            rows.append((name, outcome_of[outcome], "from log.txt"))
            if running == name:
                running = None
    return rows, running


def main() -> int:
    out, state, seconds, allow_no_gpu = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    probe = load_json(os.path.join(out, "probe.json"))
    bench = load_json(os.path.join(out, "bench.json"))
    try:
        log = open(os.path.join(out, "log.txt"), errors="replace").read()
    except OSError:
        log = ""
    statuses: dict[str, tuple[int, bool]] = {}
    try:
        for line in open(os.path.join(state, "phases.txt")):
            fields = line.split()
            statuses[fields[0]] = (int(fields[1]), "hung" in fields[2:])
    except OSError:
        pass
    lines = ["# GPU check summary", ""]
    problems: list[str] = []
    setup = os.path.join(state, "setup.txt")
    if os.path.exists(setup):
        problems.append(open(setup).read().strip())
    devices = probe.get("cuda_devices", 0)
    devices = devices if isinstance(devices, int) else 0
    machine = probe.get("machine", {}) if isinstance(probe.get("machine"), dict) else {}
    lines += [
        f"- GPU (index, name, driver, memory, used, MIG, compute mode, persistence, bus): "
        f"{machine.get('nvidia_smi', 'unknown')}",
        f"- kernel {machine.get('uname_r', '?')}; driver CUDA version {probe.get('cuda_driver_api', '?')}; "
        f"CUDA_VISIBLE_DEVICES {machine.get('cuda_visible_devices', '?')}",
        f"- Python {probe.get('python', '?')}, numpy {probe.get('numpy', '?')}, {probe.get('platform', '')}",
        f"- tritonserver {probe.get('tritonserver', probe.get('imports', '?'))}",
        f"- core: {probe.get('core', '?')}",
        f"- allocator's CUDA runtime: {probe.get('allocator_cuda_runtime', '?')} ({devices} device(s))",
        f"- CuPy {probe.get('cupy', '?')} (runtime {probe.get('cupy_cuda_runtime', '-')}, "
        f"first kernel {probe.get('cupy_first_kernel', '-')}); "
        f"torch {probe.get('torch', '?')} (CUDA {probe.get('torch_cuda', '-')}, "
        f"available {probe.get('torch_cuda_available', '-')}); JAX {probe.get('jax', '?')}",
        "- libcudart mapped in one process: " + (", ".join(probe.get("libcudart_mapped", []) or []) or "none"),
        "- libcuda mapped: " + (", ".join(probe.get("libcuda_mapped", []) or []) or "none"),
    ]
    if probe.get("bundle_import") is False:
        problems.append(f"tritonserver not imported from the bundle: {probe.get('tritonserver')}")
    unfinished = [s for s in probe.get("steps", []) if s.endswith(": running")]
    if probe and unfinished:
        problems.append(f"probe stopped in step {unfinished[-1].split(':')[0]}")
    if not probe:
        lines.append("- probe: no probe.json")
    for key in PROBE_CHECKS:
        if key in probe:
            lines.append(f"- {key.replace('_', ' ')}: {probe[key]}")
            if probe[key] is not True:
                problems.append(f"{key}: {probe[key]}")
    if devices > 0:
        for key in ("cupy_first_kernel", "torch_cuda_available"):
            if isinstance(probe.get(key), str) and probe[key].startswith("ERROR"):
                problems.append(f"{key}: {probe[key]}")
    if devices == 0:
        lines.append("- NO GPU: the GPU tests were skipped" + (" (allowed)" if allow_no_gpu else ""))
        if not allow_no_gpu:
            problems.append("no CUDA device seen by tritonserver")
    for key in ("summary", "zero_copy", "allocation", "memory_growth"):
        if key in bench:
            lines.append(f"- bench {key}: {bench[key]}")
    if "gpu_metrics" in bench:
        lines.append(f"- GPU metrics (DCGM): {bench['gpu_metrics']}")

    lines += ["", "| phase | pass | fail | error | skip | status | running when it ended |",
              "|---|---|---|---|---|---|---|"]
    per_test: list[str] = []
    reasons: dict[str, int] = {}
    for phase in PHASES:
        rc, hung = statuses.get(phase, (None, False))
        shown = "not run" if rc is None else f"{rc}{' (hung)' if hung else ''}"
        if rc is None and not problems:
            problems.append(f"{phase}: not run")
        elif rc not in (None, 0):
            problems.append(f"{phase}: status {shown}")
        if phase not in PYTEST_PHASES:
            lines.append(f"| {phase} | | | | | {shown} | |")
            continue
        verbose, running = verbose_results(phase_log(log, phase))
        path = os.path.join(out, f"{phase}.xml")
        rows = results(path) if os.path.exists(path) else verbose
        if not os.path.exists(path) and rc is not None:
            problems.append(f"{phase}: no JUnit XML (results from log.txt)")
        count = {k: sum(1 for r in rows if r[1] == k) for k in ("PASS", "FAIL", "ERROR", "SKIP")}
        if running:
            problems.append(f"{phase}: ended while {running} was running")
        lines.append(f"| {phase} | {count['PASS']} | {count['FAIL']} | {count['ERROR']} | {count['SKIP']} "
                     f"| {shown} | {running or ''} |")
        if rc is not None and (count["FAIL"] or count["ERROR"] or not rows):
            problems.append(f"{phase}: {count['FAIL']} failed, {count['ERROR']} errors, {len(rows)} results")
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
    if "==== HANG:" in log:
        lines += ["", "A phase hung: its native and Python stacks are in log.txt (search `==== HANG`)."]
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
