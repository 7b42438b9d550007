"""Start-up cost: `import tritonserver` + `Server.start()` to a ready server,
and the RSS that start adds, each measured in fresh interpreters (the core
loads once per process). Prints medians over --runs runs, and with --phases
the split of start into its steps (find, load core, CUDA, options,
ServerNew, ready).

    .venv/bin/python benchmarks/startup.py --runs 15 [--phases]

The server is the one a user starts first: an empty model repository in
EXPLICIT mode, the default core (TRITONSERVER_LIBRARY to pick another).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, tempfile, time

def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
repo = tempfile.mkdtemp()
phases = {}
rss0 = rss_mib()
c0 = time.process_time()
t0 = time.perf_counter()
import tritonserver
t1 = time.perf_counter()
c1 = time.process_time()
rss1 = rss_mib()
if sys.argv[1] == "phases":
    from tritonserver import _native
    from tritonserver._api import _options, _triton_core
    install = _triton_core.find_core()
    t = time.perf_counter(); phases["find"] = t - t1
    companions = [install.python_backend[0]] if install.python_backend else []
    _native.load_triton(install.library, companions)
    phases["load core"] = time.perf_counter() - t; t = time.perf_counter()
    _triton_core._load_cuda(install)
    _triton_core._loaded = install
    phases["cuda"] = time.perf_counter() - t; t = time.perf_counter()
    options, _ = _options.build_core_options(tritonserver.Options(
        model_repository=repo, model_control_mode=tritonserver.ModelControlMode.EXPLICIT))
    phases["options"] = time.perf_counter() - t; t = time.perf_counter()
    native = _native.Server(options)
    phases["ServerNew"] = time.perf_counter() - t; t = time.perf_counter()
    while not native.is_ready():
        pass
    phases["ready"] = time.perf_counter() - t
    t2 = time.perf_counter()
    c2 = time.process_time()
    rss2 = rss_mib()
    native.stop()
else:
    server = tritonserver.Server(model_repository=repo,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    server.start(wait_until_ready=True)
    t2 = time.perf_counter()
    c2 = time.process_time()
    rss2 = rss_mib()
    server.stop()
print(json.dumps({"import_ms": 1e3 * (t1 - t0), "start_ms": 1e3 * (t2 - t1),
                  "total_ms": 1e3 * (t2 - t0), "import_cpu_ms": 1e3 * (c1 - c0),
                  "start_cpu_ms": 1e3 * (c2 - c1), "total_cpu_ms": 1e3 * (c2 - c0), "rss_import_mib": rss1 - rss0,
                  "rss_start_mib": rss2 - rss1,
                  "phases_ms": {k: 1e3 * v for k, v in phases.items()}}))
"""


def run(mode: str) -> dict:
    # Out of the repository root: its tritonserver/ folder is the source,
    # not the installed package.
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                          timeout=120, check=True, cwd=tempfile.gettempdir())
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--phases", action="store_true", help="split start into its steps")
    args = parser.parse_args()
    results = [run("phases" if args.phases else "plain") for _ in range(args.runs)]

    def median(key: str) -> float:
        return statistics.median(r[key] for r in results)

    print(f"{args.runs} fresh interpreters, medians (wall; CPU of the process, which a busy machine"
          " inflates less):")
    for label, key in (("import tritonserver", "import"), ("start() to ready", "start"),
                       ("import + start()", "total")):
        rss = f"   +{median('rss_' + key + '_mib'):.1f} MiB RSS" if key != "total" else ""
        print(f"  {label:<22} {median(key + '_ms'):6.1f} ms wall {median(key + '_cpu_ms'):6.1f} ms CPU{rss}")
    if args.phases:
        for name in results[0]["phases_ms"]:
            print(f"    {name:<20} {statistics.median(r['phases_ms'][name] for r in results):6.1f} ms")


if __name__ == "__main__":
    main()
