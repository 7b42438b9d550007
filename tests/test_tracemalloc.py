"""Native threads that run Python keep one thread state for their life.

A thread that makes a new Python thread state each time it takes the GIL
allocates through the raw allocator without the GIL; under tracemalloc that
allocation enters tracemalloc's hook, which can resume into freed buffers
when the program calls ``tracemalloc.stop()`` meanwhile (a CPython race),
and the process dies with SIGSEGV. The package's releaser thread (which
drops the inputs Triton released while the program keeps the GIL busy) met
it within the first rounds of the pattern below. Each case runs in a child
process, so that a crash fails the test instead of the run.
"""

from __future__ import annotations

import signal

import pytest

from common import MODELS, python_model_repository, run_script

ROUNDS = 300

# One round: tracemalloc on; one request with a fresh input, which Triton
# releases on its own thread (the package parks the reference for the
# releaser); Python keeps the GIL busy for 19-25 ms (the releaser's grace is
# 20 ms and a waiting thread asks for the GIL after the 5 ms switch
# interval); tracemalloc off.
SCRIPT = """
import queue, time, tracemalloc
import numpy, tritonserver
from common import make_options

name, use_queue, rounds = {name!r}, {use_queue!r}, {rounds!r}
server = tritonserver.Server(make_options({backends!r}, server_id="tracemalloc", log_error=False, **{options!r}))
server.start(wait_until_ready=True, timeout=60)
server.load(name)
model = server.model(name)
inputs = {inputs}
for i in range(rounds):
    tracemalloc.start()
    fresh = {{k: numpy.array(v) for k, v in inputs.items()}}
    if use_queue:
        responses = queue.SimpleQueue()
        model.infer(inputs=fresh, response_queue=responses)
        response = responses.get(timeout=60)
    else:
        response = list(model.infer(inputs=fresh))[-1]
    assert response.error is None, response.error
    del response, fresh
    busy_until = time.perf_counter() + 0.019 + (i % 7) * 0.001
    while time.perf_counter() < busy_until:
        pass
    tracemalloc.stop()
server.stop()
print("rounds", rounds)
"""

ADD_SUB_INPUTS = "{'INPUT0': numpy.arange(4, dtype=numpy.float32), 'INPUT1': numpy.arange(4, dtype=numpy.float32)}"
CASES = {  # name -> (model, inputs, server options)
    "identity": ("identity_fp32", "{'INPUT0': numpy.arange(16, dtype=numpy.float32)}", {}),
    # The python model as the server picks (the stub under numpy 1, else in-process) ...
    "python_backend": ("add_sub", ADD_SUB_INPUTS, {}),
    # ... and in-process: its code runs on the core's model-instance threads.
    "python_in_process": ("add_sub", ADD_SUB_INPUTS, {"python_models": "in-process"}),
}


@pytest.mark.parametrize("delivery", ["iterator", "queue"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_tracemalloc_stop_while_inputs_are_released(case, delivery, backend_directory, tmp_path):
    name, inputs, options = CASES[case]
    code = SCRIPT.format(backends=backend_directory, inputs=inputs, name=name, use_queue=delivery == "queue",
                         rounds=ROUNDS, options=options)
    rc, out, err = run_script(code, tmp_path, timeout=300, env={"PYTHONFAULTHANDLER": "1"})
    assert rc != -signal.SIGSEGV, f"SIGSEGV (the tracemalloc race) with {name}, {delivery}:\n{err[-3000:]}"
    assert rc == 0, f"exit status {rc} with {name}, {delivery}:\n{err[-3000:]}"
    assert f"rounds {ROUNDS}" in out


# Model churn: every load brings new core threads (the instances' own, the
# model deleter's) whose first Python entry needs a thread state; made
# there without the GIL, one raced tracemalloc.stop() on another thread
# (5 of 5 runs crashed within 60 cycles). The state maker makes them under
# the GIL (cpp/thread_state.h).
CHURN_CYCLES = 300
CHURN_SCRIPT = """
import pathlib, threading, tracemalloc
import numpy, tritonserver
from common import make_options

server = tritonserver.Server(make_options({backends!r}, server_id="churn", python_models="in-process",
                                          model_repository={repo!r}, log_error=False))
server.start(wait_until_ready=True, timeout=60)
done = threading.Event()

def flip():
    while not done.is_set():
        tracemalloc.start()
        kept = [bytes(100) for _ in range(50)]
        tracemalloc.stop()

flipper = threading.Thread(target=flip)
flipper.start()
a = numpy.ones(4, numpy.float32)
try:
    for _ in range({cycles}):
        model = server.load("add_sub_4")
        for response in model.infer(inputs={{"INPUT0": a, "INPUT1": a}}):
            assert response.error is None, response.error
        server.unload("add_sub_4", wait_until_unloaded=True)
finally:
    done.set()
    flipper.join()
server.stop()
print("cycles", {cycles})
"""


def test_tracemalloc_stop_while_models_load_and_unload(backend_directory, tmp_path):
    repo = python_model_repository(tmp_path, "add_sub_4", (MODELS / "add_sub" / "1" / "model.py").read_text(),
                                   instances=4)
    code = CHURN_SCRIPT.format(backends=backend_directory, repo=str(repo), cycles=CHURN_CYCLES)
    rc, out, err = run_script(code, tmp_path, timeout=600, env={"PYTHONFAULTHANDLER": "1"})
    assert rc != -signal.SIGSEGV, f"SIGSEGV (the tracemalloc race) under model churn:\n{err[-3000:]}"
    assert rc == 0, f"exit status {rc}:\n{err[-3000:]}"
    assert f"cycles {CHURN_CYCLES}" in out
