"""The first requests of a process, arriving at once on several model
threads, never deadlock.

The native module sets up what it needs of NumPy (its C-API table) on the
first input a model reads. That set-up runs Python (an import: on NumPy 1.x a
Python shim), which may let the GIL go; done under a C++ guard (a
function-local static), a second model thread waited on the guard while
holding the GIL and the first could never take the GIL back: the whole
process froze on its first concurrent requests (7 of 8 runs with two bound
functions under numpy 1.26). The race exists only once per process, so each
round is a fresh interpreter.
"""

from __future__ import annotations

import concurrent.futures

from common import MODELS, python_model_repository, run_script

ROUNDS = 50
PARALLEL = 4  # interpreters at a time

# Two bound functions and a 4-instance python model, then 32 requests to
# each at once from asyncio, before any request ran.
SCRIPT = """
import asyncio, pathlib
import numpy, tritonserver
from tritonserver import TensorSpec
from common import make_options

repo = pathlib.Path({repo!r})
server = tritonserver.Server(make_options({backends!r}, server_id="first-use", model_repository=str(repo),
                                          python_models="in-process", log_error=False))
server.start(wait_until_ready=True, timeout=60)
spec = [TensorSpec("X", numpy.float32, (4,))]
out = [TensorSpec("Y", numpy.float32, (4,))]
first = server.bind("first", lambda X: {{"Y": X + 1}}, inputs=spec, outputs=out)
second = server.bind("second", lambda X: {{"Y": X * 2}}, inputs=spec, outputs=out)
python = server.load("add_sub_4")
x = numpy.arange(4, dtype=numpy.float32)

async def one(model, inputs):
    async for response in model.async_infer(inputs=inputs):
        assert response.error is None, response.error
        return response

async def main():
    calls = [one(first, {{"X": x}}) for _ in range(32)] + [one(second, {{"X": x}}) for _ in range(32)]
    calls += [one(python, {{"INPUT0": x, "INPUT1": x}}) for _ in range(32)]
    responses = await asyncio.gather(*calls)
    assert numpy.from_dlpack(responses[0].outputs["Y"]).tolist() == [1, 2, 3, 4]
    assert numpy.from_dlpack(responses[32].outputs["Y"]).tolist() == [0, 2, 4, 6]
    assert numpy.from_dlpack(responses[64].outputs["OUTPUT0"]).tolist() == [0, 2, 4, 6]

asyncio.run(main())
server.stop()
print("answered")
"""


def test_first_concurrent_requests_of_a_process_do_not_deadlock(backend_directory, tmp_path):
    repo = python_model_repository(tmp_path, "add_sub_4", (MODELS / "add_sub" / "1" / "model.py").read_text(),
                                   instances=4)
    code = SCRIPT.format(backends=backend_directory, repo=str(repo))

    def one_round(index: int) -> tuple[int, int, str, str]:
        folder = tmp_path / f"round{index}"
        folder.mkdir()
        return (index, *run_script(code, folder, timeout=120))

    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one_round, range(ROUNDS)))
    failed = [(i, rc, err[-1500:]) for i, rc, out, err in results if rc != 0 or "answered" not in out]
    assert not failed, f"{len(failed)} of {ROUNDS} rounds failed; the first: {failed[0]}"
