"""input_address: ADDRESS is the address of INPUT0's data as the model sees
it (as_numpy()); PREVIOUS is the previous request's INPUT0 array, kept by
the model past its request (the first request gets its own INPUT0). An
empty INPUT0 makes the model drop the array it keeps: a kept input holds
its request, and the model cannot unload while it does."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.kept = None

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            previous = data if self.kept is None else self.kept
            self.kept = data if data.size else None
            address = np.array([data.__array_interface__["data"][0]], dtype=np.uint64)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("ADDRESS", address),
                pb_utils.Tensor("PREVIOUS", np.array(previous, dtype=np.float32))]))
        return responses

    def finalize(self):
        self.kept = None
