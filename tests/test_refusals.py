"""Refused requests release what they took, at once.

A request refused before it reaches the core (a bad option, parameter,
output memory type) or by the core at submission (an unknown input, a wrong
type or shape) must not keep its inputs: NVIDIA's python/test/test_api.py
counts live tritonserver.Tensor objects after each test. Each refusal kind
is checked with that count right after the refusal (no waiting), and with
the process's RSS over 1,000 refusals of two 512 KiB inputs each.
"""

from __future__ import annotations

import numpy
import pytest

from tritonserver import InvalidArgumentError, Tensor
from common import live_tensors, refused, rss_bytes

ROWS, COLUMNS = 512, 1024  # INPUT0: 512 KiB of INT8
WORDS = 65536  # INPUT2: 512 KiB of UINT64


def _inputs() -> dict[str, Tensor]:
    """Fresh inputs of identity_multi, as Tensors (two of 512 KiB)."""
    return {
        "INPUT0": Tensor.from_dlpack(numpy.ones((ROWS, COLUMNS), numpy.int8)),
        "INPUT1": Tensor.from_dlpack(numpy.ones((1, 1, 1), numpy.float16)),
        "INPUT2": Tensor.from_dlpack(numpy.ones(WORDS, numpy.uint64)),
    }


def _unknown_input(inputs):
    inputs["NOT_AN_INPUT"] = Tensor.from_dlpack(numpy.ones(4, numpy.float32))
    return {}


def _wrong_dtype(inputs):
    inputs["INPUT2"] = Tensor.from_dlpack(numpy.ones(WORDS, numpy.float64))
    return {}


def _wrong_shape(inputs):
    inputs["INPUT0"] = Tensor.from_dlpack(numpy.ones(ROWS * COLUMNS, numpy.int8))
    return {}


# kind -> (what changes the inputs and returns the request's other
# arguments, the exception expected). The first four are refused by the
# library before the core sees the request, the last three by the core at
# submission.
REFUSALS = {
    "output_memory_type": (lambda inputs: {"output_memory_type": "no_such_memory"}, InvalidArgumentError),
    "parameters": (lambda inputs: {"parameters": {"p": object()}}, InvalidArgumentError),
    "request_id": (lambda inputs: {"request_id": b"not a str"}, TypeError),
    "options": (lambda inputs: {"priority": -1}, InvalidArgumentError),
    "unknown_input": (_unknown_input, InvalidArgumentError),
    "wrong_dtype": (_wrong_dtype, InvalidArgumentError),
    "wrong_shape": (_wrong_shape, InvalidArgumentError),
}


def _refuse(model, kind: str) -> None:
    """One refused request of `kind`; nothing of it is referenced after."""
    change, expected = REFUSALS[kind]
    inputs = _inputs()
    arguments = change(inputs)
    with refused(expected):
        model.infer(inputs=inputs, **arguments)


def _serve(multi) -> None:
    """One good request: the model still serves (and what earlier requests
    left for the next submission is released, so counts start level)."""
    inputs = _inputs()
    responses = list(multi.infer(inputs=inputs))
    assert numpy.array_equal(numpy.from_dlpack(responses[0].outputs["OUTPUT2"]),
                             numpy.from_dlpack(inputs["INPUT2"]))


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_refused_request_keeps_no_tensor(model, kind: str) -> None:
    multi = model("identity_multi")
    _serve(multi)
    before = live_tensors()
    for _ in range(3):
        _refuse(multi, kind)
    # Counted at once: the inputs must be gone when infer() has raised.
    assert live_tensors() <= before  # earlier tests' may go meanwhile
    _serve(multi)


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_refusals_leave_rss_flat(model, kind: str) -> None:
    multi = model("identity_multi")
    _serve(multi)
    tensors = live_tensors()
    for _ in range(50):  # warm-up: allocator pools, interned strings
        _refuse(multi, kind)
    before = rss_bytes()
    for _ in range(1000):
        _refuse(multi, kind)
    grown = rss_bytes() - before
    # A leak of the inputs would be ~1 GiB (1,000 x 1 MiB); allow noise.
    assert grown < 128 << 20, f"RSS grew by {grown >> 20} MiB over 1,000 refusals"
    assert live_tensors() <= tensors


def test_refused_async_request_keeps_no_tensor(model) -> None:
    import asyncio

    multi = model("identity_multi")
    _serve(multi)
    before = live_tensors()

    async def main() -> None:
        for kind in sorted(REFUSALS):
            change, expected = REFUSALS[kind]
            inputs = _inputs()
            arguments = change(inputs)
            with refused(expected):
                async for _ in multi.async_infer(inputs=inputs, **arguments):
                    pass
            del inputs, arguments

    asyncio.run(main())
    assert live_tensors() <= before  # earlier tests' may go meanwhile
