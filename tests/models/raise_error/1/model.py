"""raise_error: answers every request with an error response.

Clients should see an inference error whose message contains
"raise_error model: deliberate failure".
"""

import triton_python_backend_utils as pb_utils

MESSAGE = "raise_error model: deliberate failure"


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(MESSAGE))
            for _ in requests
        ]
