"""countdown: a decoupled (streaming) model; one response per step."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0])
            for value in range(start, 0, -1):
                out = pb_utils.Tensor("VALUE", np.array([value], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
