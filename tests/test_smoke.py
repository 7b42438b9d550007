import numpy

from conftest import as_numpy, single


def test_identity_and_python_models_serve(model):
    data = numpy.arange(6, dtype=numpy.float32)
    out = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), data)
    out = single(model("add_sub").infer(inputs={"INPUT0": data, "INPUT1": data}))
    numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), data * 2)
