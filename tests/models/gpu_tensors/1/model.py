"""OUTPUT0 = 2 * INPUT0, computed on the GPU with PyTorch and handed back
through DLPack as the python backend's README shows (to_dlpack /
from_dlpack); INPUT_ON_GPU says whether the input reached the model in GPU
memory (is_cpu() False). With PyTorch's CUDA only (the GPU tests)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        import torch.utils.dlpack

        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            data = torch.utils.dlpack.from_dlpack(tensor.to_dlpack())
            doubled = data.to("cuda") * 2
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor.from_dlpack("OUTPUT0", torch.utils.dlpack.to_dlpack(doubled)),
                pb_utils.Tensor("INPUT_ON_GPU", np.array([not tensor.is_cpu()])),
            ]))
        return responses
