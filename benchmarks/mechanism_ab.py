"""The 5 % rule on user-visible rows: for each performance mechanism, the
rows it is meant to speed up, run with this build (A) and with a build in
which the mechanism is replaced by its simplest equivalent (B), interleaved.

    .venv/bin/python benchmarks/mechanism_ab.py --b-site DIR [--rounds 5]
        [--only TEXT] [--scale 1.0]

A is the `tritonserver` of the interpreter running this script; B is the
one installed in DIR (a `pip install --target DIR` of the B source; each
child process of B gets PYTHONPATH=DIR). Each round runs every row once
with A and once with B, each in a fresh child process
(benchmarks/bench_binding.py, which warms up on a tenth of the requests
first), the order rotating per round (A B, B A, ...; A B B0, B B0 A, ...), so that the
shared machine's drift hits both alike. The figure is CPU time per
request: user + sys of the whole child process (all its threads, getrusage)
over the measured requests, steadier on a shared VM than wall-clock
rates; requests/s of the same runs are reported beside it.

The B build is the tree the figures were measured on (commit ec096aa, before
the backend's C++ moved to cpp/python_backend/; the patch names the old
paths) with benchmarks/mechanism_ab_b.patch applied: three switches that
B's child processes set. Made side by side with .venv's build of ec096aa:

    mkdir /tmp/ab-b && git archive ec096aa | tar -x -C /tmp/ab-b
    (cd /tmp/ab-b && patch -p1 < benchmarks/mechanism_ab_b.patch)
    .venv/bin/python -m pip install --no-build-isolation --no-deps \
        -C cmake.define.TRITONSERVER_TESTING=ON --target /tmp/ab-b-site /tmp/ab-b

The switches:

- TRITONSERVER_AB_ANEXT=python: AsyncResponseIterator.__anext__ is an
  `async def` awaiting the loop's future (as before commit aac9816), not
  the native NextResponse (cpp/asyncio_waiters.cc);
- TRITONSERVER_AB_NUMPY=nanobind: in-process python models' input arrays
  are nanobind's `ndarray<numpy>` export (buffer protocol + numpy.asarray,
  the private copy in a capsule-owned vector), as before cpp/numpy_views;
- TRITONSERVER_AB_BOUND=pb_utils: bound plain functions take the ordinary
  pb_utils execute path (Model.execute of _bound.py), not
  `_execute_natives` / `send_arrays` / `input_value`.

The rows of "GIL kept on decoupled sends" take no switch: their B is the
tree before that change (3ec7e85 + 1779c15), built into its own --b-site.
So do those of "asyncio loop polls before it sleeps" (B: 239ad05, the tree
before the selector's poll).

--no-spin sets TRITONSERVER_SPIN_WAIT=0 for every run: a sync request's
wait then sleeps at once instead of polling first, so that its CPU time is
the work done rather than the time waited (which follows the machine's
load).

--control adds B0, the B build without its switches (A's code paths),
to the rounds: the B0/A ratio is the difference between the two builds
when nothing differs.

Prints one line per run and, at the end, a Markdown table per row: median
CPU us per request (per response for the stream) of A and B, B/A, the
range of the per-round B/A ratios, B/A of the smallest figure each
(the runs least disturbed by the machine's other work), median requests/s (responses/s for the
stream), and the load average (1 min) seen during the runs.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
from dataclasses import dataclass, field

from tritonserver._api import _triton_core

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from run import MODELS, make_backend_folder, run_json  # noqa: E402  (benchmarks/run.py)

BENCH = pathlib.Path(__file__).resolve().parent / "bench_binding.py"


@dataclass
class Row:
    mechanism: str
    name: str
    args: list[str]
    b_env: dict[str, str]
    requests: int
    responses: int = 1  # per request (a stream's): CPU time and rate are per response
    runs: dict[str, list[dict]] = field(default_factory=lambda: {"A": [], "B": [], "B0": []})


ANEXT = {"TRITONSERVER_AB_ANEXT": "python"}
NUMPY = {"TRITONSERVER_AB_NUMPY": "nanobind"}
BOUND = {"TRITONSERVER_AB_BOUND": "pb_utils"}
IN_PROCESS = ["--python-models", "in-process"]


def rows() -> list[Row]:
    return [
        Row("NextResponse", "identity 16xfp32 asyncio 64", ["--model", "identity_fp32", "--inflight", "64"],
            ANEXT, 40000),
        Row("NextResponse", "python stream of 1,000 responses, asyncio (in-process)",
            ["--model", "streaming", "--stream-count", "1000", "--asyncio", *IN_PROCESS], ANEXT, 200,
            responses=1000),
        Row("numpy_views", "python add_sub 16xfp32 sync (in-process)", ["--model", "add_sub", *IN_PROCESS],
            NUMPY, 20000),
        Row("numpy_views", "python add_sub 16xfp32 asyncio 64 (in-process)",
            ["--model", "add_sub", "--inflight", "64", *IN_PROCESS], NUMPY, 30000),
        Row("bound second path", "bound add_sub 16xfp32 sync", ["--model", "add_sub", "--bind", *IN_PROCESS],
            BOUND, 20000),
        Row("bound second path", "bound add_sub 16xfp32 asyncio 64",
            ["--model", "add_sub", "--bind", "--inflight", "64", *IN_PROCESS], BOUND, 30000),
        # B: the tree before the change (no switch), --b-site its build.
        Row("GIL kept on decoupled sends", "python stream of 1,000 responses, sync (in-process)",
            ["--model", "streaming", "--stream-count", "1000", *IN_PROCESS], {}, 200, responses=1000),
        Row("GIL kept on decoupled sends", "python streams of 32 responses, sync 4 threads (in-process)",
            ["--model", "streaming", "--stream-count", "32", "--threads", "4", *IN_PROCESS], {}, 4000,
            responses=32),
        Row("GIL kept on decoupled sends", "python streams of 32 responses, asyncio 4 (in-process)",
            ["--model", "streaming", "--stream-count", "32", "--inflight", "4", *IN_PROCESS], {}, 4000,
            responses=32),
        # B: the tree before the change (no switch), --b-site its build.
        Row("asyncio loop polls before it sleeps", "identity 16xfp32 asyncio 1",
            ["--model", "identity_fp32", "--asyncio"], {}, 20000),
        Row("asyncio loop polls before it sleeps", "python add_sub 16xfp32 asyncio 1 (in-process)",
            ["--model", "add_sub", "--asyncio", *IN_PROCESS], {}, 10000),
        Row("asyncio loop polls before it sleeps", "python add_sub 16xfp32 asyncio 16 (in-process)",
            ["--model", "add_sub", "--inflight", "16", *IN_PROCESS], {}, 20000),
        Row("asyncio loop polls before it sleeps", "identity 16xfp32 asyncio 64",
            ["--model", "identity_fp32", "--inflight", "64"], {}, 40000),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--b-site", required=True, help="the B build's install folder (pip install --target)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="", help="only the rows whose mechanism or name contains one of "
                        "these (comma-separated)")
    parser.add_argument("--scale", type=float, default=1.0, help="times each row's request count")
    parser.add_argument("--no-spin", action="store_true", help="TRITONSERVER_SPIN_WAIT=0 in every run: "
                        "a sync wait sleeps at once, so its CPU time is work, not polling")
    parser.add_argument("--control", action="store_true", help="also B0: the B build without its switches "
                        "(A's code paths), interleaved with A and B")
    args = parser.parse_args()

    backends = make_backend_folder(_triton_core.load_core())
    chosen = [r for r in rows() if any(p in r.mechanism or p in r.name for p in args.only.split(","))]
    env_a = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("TRITONSERVER_AB_")}
    if args.no_spin:
        env_a["TRITONSERVER_SPIN_WAIT"] = "0"
    loads: list[float] = []
    for rnd in range(args.rounds):
        for row in chosen:
            command = [sys.executable, str(BENCH), "--repository", str(MODELS), "--backends", str(backends),
                       "--requests", str(max(4, int(row.requests * args.scale))), *row.args]
            builds = ["A", "B", "B0"] if args.control else ["A", "B"]
            shift = rnd % len(builds)  # each build first in turn
            for build in builds[shift:] + builds[:shift]:
                env = dict(env_a)
                if build == "B":
                    env.update(row.b_env, PYTHONPATH=args.b_site)
                elif build == "B0":
                    env.update(PYTHONPATH=args.b_site)
                loads.append(os.getloadavg()[0])
                result = run_json(command, env)
                row.runs[build].append(result)
                rate = result["responses_per_s" if row.responses > 1 else "requests_per_s"]
                print(f"round {rnd + 1} {row.name} {build}: {result['process_cpu_us'] / row.responses:.2f} CPU us, "
                      f"{rate:,.0f}/s, load {loads[-1]:.2f}", flush=True)
            loads.append(os.getloadavg()[0])

    print(f"\n{args.rounds} interleaved rounds; load average (1 min) during the runs "
          f"{min(loads):.2f}-{max(loads):.2f}, median {statistics.median(loads):.2f}\n")
    control = " B0/A (per-round range) |" if args.control else ""
    print("| mechanism | row | requests per run | CPU us/request A (range) | B (range) | B/A (per-round range) |"
          f"{control} B/A of the minima | A /s | B /s |")
    print("|---|---|---:|---|---|---|" + ("---|" if args.control else "") + "---:|---:|---:|")
    for row in chosen:
        a = [r["process_cpu_us"] / row.responses for r in row.runs["A"]]
        b = [r["process_cpu_us"] / row.responses for r in row.runs["B"]]
        key = "responses_per_s" if row.responses > 1 else "requests_per_s"
        ratios = sorted(y / x for x, y in zip(a, b))
        b0 = [r["process_cpu_us"] / row.responses for r in row.runs["B0"]]
        same = sorted(y / x for x, y in zip(a, b0))
        control = (f" {statistics.median(b0) / statistics.median(a):.3f} ({same[0]:.3f}-{same[-1]:.3f}) |"
                   if b0 else "")
        print(f"| {row.mechanism} | {row.name} | {row.runs['A'][0]['requests']:,} "
              f"| {statistics.median(a):.1f} ({min(a):.1f}-{max(a):.1f}) "
              f"| {statistics.median(b):.1f} ({min(b):.1f}-{max(b):.1f}) "
              f"| {statistics.median(b) / statistics.median(a):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f}) |{control}"
              f" {min(b) / min(a):.3f} | {statistics.median(r[key] for r in row.runs['A']):,.0f} "
              f"| {statistics.median(r[key] for r in row.runs['B']):,.0f} |")


if __name__ == "__main__":
    main()
