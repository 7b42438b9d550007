"""text_stats: for each UTF-8 string, its length in characters and its
upper-case form."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            texts = [t.decode("utf-8") for t in pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()]
            lengths = np.array([len(t) for t in texts], dtype=np.int64)
            upper = np.array([t.upper().encode("utf-8") for t in texts], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("LENGTH", lengths), pb_utils.Tensor("UPPER", upper)]))
        return responses
