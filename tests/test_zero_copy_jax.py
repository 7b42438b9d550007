"""JAX shares outputs too: `jax.dlpack.from_dlpack` and `jnp.from_dlpack`
give arrays over the very buffer Triton wrote (skipped without jax)."""

from __future__ import annotations

import numpy
import pytest

from common import single

jax = pytest.importorskip("jax", reason="jax is not installed (pip install jax)")
jnp = pytest.importorskip("jax.numpy")


@pytest.mark.parametrize("convert", ["jax.dlpack.from_dlpack", "jnp.from_dlpack"])
def test_jax_shares_a_float32_output(model, convert):
    data = numpy.arange(4096, dtype=numpy.float32) * 0.5
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    out = response.outputs["OUTPUT0"]
    from_dlpack = jax.dlpack.from_dlpack if convert == "jax.dlpack.from_dlpack" else jnp.from_dlpack
    array = from_dlpack(out)
    assert array.unsafe_buffer_pointer() == out.data_ptr, "JAX copied the output"
    del response, out
    numpy.testing.assert_array_equal(numpy.asarray(array), data)   # still valid on its own


def test_jax_in_32_bit_mode_converts_a_64_bit_output(model):
    # JAX's default (jax_enable_x64 off) turns int64 into int32: a copy.
    data = numpy.arange(16, dtype=numpy.int64)
    response = single(model("echo_all_types").infer(inputs={"IN_INT64": data}, output_names=["OUT_INT64"]))
    out = response.outputs["OUT_INT64"]
    if jax.config.jax_enable_x64:
        pytest.skip("jax_enable_x64 is on here")
    array = jax.dlpack.from_dlpack(out)
    assert array.dtype == jnp.int32 and array.unsafe_buffer_pointer() != out.data_ptr
    numpy.testing.assert_array_equal(numpy.asarray(array), data)
