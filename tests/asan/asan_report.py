"""Summarize the sanitizer logs of tests/run_asan.sh and tell ours from not ours.

Usage: python tests/asan/asan_report.py LOG_DIR [REPORT_FILE]

Reads every file in LOG_DIR written by ASAN_OPTIONS/UBSAN_OPTIONS
log_path=LOG_DIR/san with log_exe_name=1 (san.<program>.<pid>) and splits it
into findings:
  - AddressSanitizer errors (heap-buffer-overflow, use-after-free, ...),
  - UndefinedBehaviorSanitizer runtime errors,
  - LeakSanitizer leak records (Direct/Indirect leak of ...) that were not
    suppressed by tests/asan/lsan.supp,
  - sanitizer failures (a CHECK failure, LeakSanitizer's own fatal error).

Each finding is "ours" when a frame of its stack is in this project's code:
the _native extension (cpp/, and nanobind, which is compiled into it), or
"test backend" when it is in tests/backends/identity (libtriton_identity.so).
Everything else is "not ours" and is attributed to the first library in the
stack below the sanitizer's own frames (libpython, libtritonserver, the
python backend, numpy, ...).

Prints a summary (also written to REPORT_FILE if given) with the full text
of each distinct finding in our code or the test backend. Exit status: 1
when there is any finding in our code or the test backend, else 0.
"""

from __future__ import annotations

import collections
import os
import re
import sys

FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ (.*)$")
OURS = (re.compile(r"/cpp/[\w./-]+\.(cc|h)\b"), re.compile(r"tritonserver/_native\."),
        re.compile(r"/nanobind/(src|include)/"))
TEST_BACKEND = (re.compile(r"libtriton_identity\.so"), re.compile(r"tests/backends/identity/"))
# Frames of the sanitizer runtime and of the C/C++ allocators: skipped when
# naming the library a finding belongs to.
RUNTIME = re.compile(r"libsanitizer|/libasan\.so|/libubsan\.so|__interceptor_|operator new|"
                     r"operator delete|\bmalloc\b|\bcalloc\b|\brealloc\b")
OWNERS = [
    ("python backend stub", re.compile(r"triton_python_backend_stub")),
    ("python backend (libtriton_python)", re.compile(r"libtriton_python\.so")),
    ("libtritonserver", re.compile(r"libtritonserver")),
    ("numpy", re.compile(r"/numpy/")),
    ("CPython", re.compile(r"libpython3|Objects/|Python/|Modules/|Include/|Parser/")),
    ("libstdc++", re.compile(r"libstdc\+\+")),
    ("glibc", re.compile(r"libc\.so|nptl/|sysdeps/|elf/dl-")),
]


def frames(text: str) -> list[str]:
    return [m.group(2) for line in text.splitlines() if (m := FRAME.match(line))]


def _is(frame: str, patterns) -> bool:
    return any(p.search(frame) for p in patterns)


def _owner(frame: str) -> str:
    for owner, pattern in OWNERS:
        if pattern.search(frame):
            return owner
    return "other"


# A Triton C API entry point (TRITONSERVER_*, TRITONBACKEND_*): an object it
# allocates and returns belongs to its caller.
TRITON_API = re.compile(r"\bin (TRITONSERVER|TRITONBACKEND)_\w+ ")


def classify(stack: list[str]) -> str:
    """Who owns the finding: the code at the top of the stack (the access for
    an error, the allocation site for a leak), skipping the sanitizer's and
    the allocator's frames. An object allocated inside a Triton API call
    made directly by our code (or the test backend) and returned to it, such
    as the TRITONSERVER_Error* of TRITONSERVER_InferenceResponseError, is the
    caller's. A leak deeper inside Triton or CPython that our code merely
    reached is theirs ("reached from our code" is noted)."""
    frames_ = [f for f in stack if not RUNTIME.search(f)]
    if not frames_:
        return "not ours: (no frames)"
    top = frames_[0]
    if _is(top, OURS):
        return "ours"
    if _is(top, TEST_BACKEND):
        return "test backend"
    if TRITON_API.search(top) and len(frames_) > 1:
        if _is(frames_[1], OURS):
            return "ours"
        if _is(frames_[1], TEST_BACKEND):
            return "test backend"
    owner = f"not ours: {_owner(top)}"
    if any(_is(f, OURS) for f in frames_[1:]):
        owner += " (reached from our code)"
    return owner


def signature(stack: list[str], depth: int = 6) -> tuple[str, ...]:
    """Frames without addresses, to group repeats of one finding."""
    return tuple(re.sub(r"\+0x[0-9a-f]+\)", ")", f) for f in stack[:depth])


def findings(text: str):
    """(kind, text) for each finding in one log file."""
    # LeakSanitizer: one finding per leak record.
    for block in re.findall(r"ERROR: LeakSanitizer: detected memory leaks\n(.*?)(?=\nSUMMARY:|\Z)",
                            text, re.S):
        for record in re.split(r"\n(?=(?:Direct|Indirect) leak of )", block):
            record = record.strip()
            if record.startswith(("Direct leak", "Indirect leak")):
                yield "leak", record
    # AddressSanitizer errors (everything up to ABORTING or the next report).
    for m in re.finditer(r"^(==\S+==ERROR: AddressSanitizer: .*?)(?=^==\S+==ABORTING|^={10,}|\Z)",
                         text, re.S | re.M):
        yield "asan error", m.group(1).strip()
    # UBSan runtime errors: the message line and its stack.
    for m in re.finditer(r"^(\S+:\d+:\d+: runtime error: .*?)(?=^\S+:\d+:\d+: runtime error: |^SUMMARY|^==|\Z)",
                         text, re.S | re.M):
        yield "ubsan", m.group(1).strip()
    for m in re.finditer(r"^(.*(?:CHECK failed|LeakSanitizer has encountered a fatal error).*)$", text, re.M):
        yield "sanitizer failure", m.group(1).strip()


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    folder = sys.argv[1]
    counts: collections.Counter = collections.Counter()
    bytes_leaked: collections.Counter = collections.Counter()
    examples: dict = {}
    failures: list[str] = []
    files = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for name in files:
        path = os.path.join(folder, name)
        if not os.path.isfile(path) or not name.startswith("san."):
            continue
        program = name.split(".")[1] if name.count(".") >= 2 else "?"
        with open(path, errors="replace") as f:
            text = f.read()
        for kind, body in findings(text):
            if kind == "sanitizer failure":
                failures.append(f"{name}: {body}")
                continue
            # For an AddressSanitizer error the first stack is the faulting
            # access (the allocation and thread stacks follow it).
            stack = frames(body.split("\n\n")[0] if kind == "asan error" else body)
            who = classify(stack)
            key = (program, kind, who)
            counts[key] += 1
            if kind == "leak":
                m = re.match(r"\w+ leak of (\d+) byte", body)
                bytes_leaked[key] += int(m.group(1)) if m else 0
            if who in ("ours", "test backend") or who.endswith("(reached from our code)"):
                examples.setdefault((kind, who, signature(stack)), (name, body))

    lines = ["Sanitizer findings (program, kind, owner): count", ""]
    if not counts:
        lines.append("  none")
    for (program, kind, who), n in sorted(counts.items()):
        extra = f", {bytes_leaked[(program, kind, who)]} bytes" if kind == "leak" else ""
        lines.append(f"  {program:32} {kind:12} {who:40} {n}{extra}")
    if failures:
        lines += ["", "Sanitizer failures (the check did not complete in that process):"]
        lines += [f"  {f}" for f in failures]
    ours = [k for k in examples if k[1] == "ours"]
    test_backend = [k for k in examples if k[1] == "test backend"]
    reached = [k for k in examples if k[1].endswith("(reached from our code)")]
    lines += ["", f"Distinct findings in our code (cpp/, _native): {len(ours)}",
              f"Distinct findings in the identity test backend: {len(test_backend)}",
              f"Distinct findings of other code reached from ours (listed, not failing;"
              f" an Indirect leak here is usually held by a leak above): {len(reached)}"]
    for key in ours + test_backend + reached:
        name, body = examples[key]
        lines += ["", f"---- {key[1]}: {key[0]} (first seen in {name}) ----", body]
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(report)
    return 1 if ours or test_backend else 0


if __name__ == "__main__":
    sys.exit(main())
