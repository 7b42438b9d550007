"""echo_all_types: returns every given input IN_<T> unchanged as OUT_<T>.

Covers each Triton data type (BOOL, UINT8..UINT64, INT8..INT64, FP16, FP32,
FP64, STRING/BYTES). All inputs are optional; only outputs whose input was
sent appear in the response. STRING tensors are numpy object arrays of raw
bytes, so empty and non-UTF-8 elements pass through untouched.
"""

import triton_python_backend_utils as pb_utils

TYPES = [
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
    "INT64", "FP16", "FP32", "FP64", "STRING",
]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for t in TYPES:
                tensor = pb_utils.get_input_tensor_by_name(request, "IN_" + t)
                if tensor is None:  # optional input not sent
                    continue
                outputs.append(pb_utils.Tensor("OUT_" + t, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
