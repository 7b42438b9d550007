"""parameters: returns the request's parameters as JSON.

INPUT0 is ignored. PARAMETERS is a one-element BYTES tensor holding
request.parameters() (a JSON object string, e.g. '{"key": "value"}') as UTF-8.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = request.parameters()
            data = np.array([params.encode("utf-8")], dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("PARAMETERS", data)])
            )
        return responses
