"""Concurrency: 8 threads sending requests at once, blocking, asyncio (one
event loop per thread) and decoupled streams, every result checked; and the
same while another thread unloads and reloads the model in a loop (requests
may then fail, but only with a TritonError, and nothing may hang or crash)."""

from __future__ import annotations

import ast
import asyncio
import threading
import time
import traceback

import numpy
import pytest

import tritonserver
from tritonserver import TritonError
from common import as_numpy, assert_no_live_buffers, call_with_deadline, dedicated_server

THREADS = 8
HANG_S = 120  # generous: only there so a bug cannot hang the suite


def payload(thread: int, i: int) -> numpy.ndarray:
    """A distinct input per (thread, request), so a mixed-up response shows."""
    return numpy.arange(16, dtype=numpy.float32) + numpy.float32(thread * 100_000 + i)


def error_outcome(error: BaseException) -> tuple:
    # Drop the frames' locals: a kept infer() exception holds its native
    # request (docs/hostile_inputs.md, "Bugs").
    if error.__traceback__ is not None:
        traceback.clear_frames(error.__traceback__)
    return ("error", type(error), str(error))


class Tally:
    """Outcomes of every request, from every thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ok = 0
        self.errors: list[tuple] = []      # TritonErrors, when allowed
        self.failures: list[str] = []      # wrong results, other exceptions

    def success(self) -> None:
        with self.lock:
            self.ok += 1

    def error(self, error: BaseException, allowed: bool) -> None:
        outcome = error_outcome(error)
        with self.lock:
            if allowed and issubclass(outcome[1], TritonError):
                self.errors.append(outcome)
            else:
                self.failures.append(f"{outcome[1].__name__}: {outcome[2]}")


def sync_worker(model: tritonserver.Model, thread: int, n: int, tally: Tally, errors_allowed: bool,
                until: threading.Event | None = None) -> None:
    """n requests (or, with `until`, requests until it is set, at most n)."""
    for i in range(n):
        if until is not None and until.is_set():
            return
        data = payload(thread, i)
        try:
            responses = list(model.infer(inputs={"INPUT0": data}))
            assert len(responses) == 1 and responses[0].final
            numpy.testing.assert_array_equal(as_numpy(responses[0].outputs["OUTPUT0"]), data)
            tally.success()
        except BaseException as e:  # noqa: BLE001
            tally.error(e, errors_allowed and isinstance(e, TritonError))


def async_worker(model: tritonserver.Model, thread: int, n: int, tally: Tally, errors_allowed: bool,
                 until: threading.Event | None = None) -> None:
    async def one(i: int) -> None:
        data = payload(thread, i)
        try:
            responses = [r async for r in model.async_infer(inputs={"INPUT0": data})]
            assert len(responses) == 1 and responses[0].final
            numpy.testing.assert_array_equal(as_numpy(responses[0].outputs["OUTPUT0"]), data)
            tally.success()
        except BaseException as e:  # noqa: BLE001
            tally.error(e, errors_allowed and isinstance(e, TritonError))

    async def main() -> None:
        for start in range(0, n, 8):  # 8 at a time in flight on this loop
            if until is not None and until.is_set():
                return
            await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(start, min(n, start + 8)))), HANG_S)

    asyncio.run(main())


def stream_worker(model: tritonserver.Model, thread: int, n: int, tally: Tally, errors_allowed: bool) -> None:
    for i in range(n):
        count = 1 + (thread + i) % 4
        try:
            responses = list(model.infer(inputs={"COUNT": numpy.array([count], numpy.int32)}))
            assert [r.final for r in responses] == [False] * count + [True]
            assert [as_numpy(r.outputs["OUT"]).tolist() for r in responses[:-1]] == [[k] for k in range(count)]
            tally.success()
        except BaseException as e:  # noqa: BLE001
            tally.error(e, errors_allowed and isinstance(e, TritonError))


def run_threads(targets: list, deadline: float = HANG_S) -> None:
    threads = [threading.Thread(target=target, args=args, daemon=True) for target, args in targets]
    for thread in threads:
        thread.start()
    end = time.monotonic() + deadline
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    assert not [t for t in threads if t.is_alive()], "a worker thread hung"


def mixed_load(identity: tritonserver.Model, streaming: tritonserver.Model, n: int) -> Tally:
    """8 threads: sync and async on identity_fp32, streams on `streaming`."""
    tally = Tally()
    targets = []
    for t in range(THREADS):
        kind = t % 3
        if kind == 0:
            targets.append((sync_worker, (identity, t, n, tally, False)))
        elif kind == 1:
            targets.append((async_worker, (identity, t, n, tally, False)))
        else:
            targets.append((stream_worker, (streaming, t, n, tally, False)))
    run_threads(targets)
    return tally


@pytest.mark.parametrize("n", [40])
def test_eight_threads_mixed(model, n):
    tally = mixed_load(model("identity_fp32"), model("streaming"), n)
    assert tally.failures == []
    assert tally.errors == []
    assert tally.ok == THREADS * n
    assert_no_live_buffers()


@pytest.mark.stress
def test_eight_threads_mixed_stress(model):
    n = 500
    tally = mixed_load(model("identity_fp32"), model("streaming"), n)
    assert tally.failures == []
    assert tally.errors == []
    assert tally.ok == THREADS * n
    assert_no_live_buffers()


# -- while the model is unloaded and reloaded -----------------------------------------
@pytest.fixture
def reload_server(backend_directory, request):
    with dedicated_server(backend_directory, f"concurrency-{request.node.name}", ["identity_fp32"]) as srv:
        yield srv


def reload_while_serving(srv: tritonserver.Server, cycles: int) -> tuple[Tally, list]:
    """8 threads (sync and asyncio) send requests to identity_fp32 while
    another thread unloads and reloads it `cycles` times."""
    identity = srv.model("identity_fp32")
    tally = Tally()
    done = threading.Event()
    reload_errors: list = []

    def reloader():
        try:
            for cycle in range(cycles):
                time.sleep(0.01)  # serving
                try:
                    srv.unload("identity_fp32", wait_until_unloaded=cycle % 2 == 0, timeout=HANG_S)
                    time.sleep(0.002)
                    srv.load("identity_fp32")
                except BaseException as e:  # noqa: BLE001
                    reload_errors.append(error_outcome(e))
        finally:
            done.set()

    threads = [threading.Thread(target=reloader, daemon=True)]
    for t in range(THREADS):
        target = sync_worker if t % 2 == 0 else async_worker
        threads.append(threading.Thread(target=target, args=(identity, t, 10**9, tally, True, done), daemon=True))
    for thread in threads:
        thread.start()
    end = time.monotonic() + HANG_S
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    assert not [t for t in threads if t.is_alive()], "a worker or load/unload hung while the model was reloading"
    # The model is there at the end, and serves.
    srv.load("identity_fp32")
    data = numpy.arange(5, dtype=numpy.float32)
    [last] = call_with_deadline(lambda: list(identity.infer(inputs={"INPUT0": data})), HANG_S)
    numpy.testing.assert_array_equal(as_numpy(last.outputs["OUTPUT0"]), data)
    return tally, reload_errors


def check_reload_outcome(tally: Tally, cycles: int, reload_errors: list) -> None:
    assert tally.failures == [], tally.failures[:5]
    assert tally.ok > 0, "no request was served between the reloads"
    # Load and unload may refuse while the other runs, but only with a TritonError.
    assert all(issubclass(kind, TritonError) for _, kind, _ in reload_errors), reload_errors[:5]
    kinds = sorted({kind.__name__ for _, kind, _ in tally.errors})
    print(f"\nreload: {cycles} cycles, {tally.ok} served, {len(tally.errors)} refused {kinds}, "
          f"{len(reload_errors)} load/unload errors")


def test_eight_threads_while_the_model_reloads(reload_server):
    tally, reload_errors = reload_while_serving(reload_server, cycles=20)
    check_reload_outcome(tally, 20, reload_errors)
    del tally
    assert_no_live_buffers()


@pytest.mark.stress
def test_eight_threads_while_the_model_reloads_stress(reload_server):
    tally, reload_errors = reload_while_serving(reload_server, cycles=300)
    check_reload_outcome(tally, 300, reload_errors)
    del tally
    assert_no_live_buffers()


# -- unload + load in a tight loop under heavy traffic, in a fresh interpreter ------
# The Triton 2.51 core crashed (SIGSEGV in ~TritonModelInstance ->
# StopBackendThread, on its ModelDeleter thread) when a model was loaded
# while the previous instance of the same model, unloaded with requests in
# flight, was being destroyed. Server.load() now waits for that first. In a
# subprocess: a crash is a failed test, not a crashed pytest.
CHURN_SCRIPT = """
import threading, time, numpy, tritonserver
from common import make_options
server = tritonserver.Server(make_options({backend_directory!r}, server_id="churn", exit_timeout=10,
                                          log_error=False))
server.start(wait_until_ready=True, timeout=60)
model = server.load("identity_fp32")
data = numpy.arange(256, dtype=numpy.float32)
done = threading.Event()
lock = threading.Lock()
counts = {{"served": 0, "refused": 0, "cycles": 0}}
bad = []

def worker():
    while not done.is_set():
        try:
            [response] = model.infer(inputs={{"INPUT0": data}})
            assert numpy.array_equal(numpy.from_dlpack(response.outputs["OUTPUT0"]), data)
            kind = "served"
        except tritonserver.TritonError:
            kind = "refused"  # the model was unloaded
        except BaseException as e:
            bad.append(repr(e))
            return
        with lock:
            counts[kind] += 1

threads = [threading.Thread(target=worker) for _ in range(8)]
for thread in threads:
    thread.start()
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    server.unload("identity_fp32")  # returns at once: its requests in flight go on
    server.load("identity_fp32")
    counts["cycles"] += 1
done.set()
for thread in threads:
    thread.join(60)
print("CHURN", counts, bad[:3], flush=True)
server.stop()
"""


def run_churn(backend_directory, tmp_path, seconds: float) -> None:
    from common import run_script

    rc, out, err = run_script(CHURN_SCRIPT.format(backend_directory=backend_directory, seconds=seconds),
                              tmp_path, timeout=seconds + HANG_S)
    print(out)
    assert rc == 0, f"rc={rc} (-11: the core crashed) {out[-1000:]} {err[-3000:]}"
    line = next(line for line in out.splitlines() if line.startswith("CHURN"))
    assert line.endswith("[]"), line  # only results or TritonErrors
    counts = ast.literal_eval(line.split(" ", 1)[1].rsplit(" [", 1)[0])
    assert counts["cycles"] > 0 and counts["served"] > 0, line


def test_unload_and_load_in_a_loop_under_heavy_traffic(backend_directory, tmp_path):
    run_churn(backend_directory, tmp_path, seconds=10)


@pytest.mark.stress
def test_unload_and_load_in_a_loop_under_heavy_traffic_stress(backend_directory, tmp_path):
    run_churn(backend_directory, tmp_path, seconds=120)
