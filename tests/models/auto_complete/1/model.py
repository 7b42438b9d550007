"""auto_complete: the config file names no tensors; auto_complete_config()
adds INPUT0 and OUTPUT0 (FP32 vectors) and a max batch size of 0.
OUTPUT0 = 2 * INPUT0."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]})
        auto_complete_model_config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]})
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", 2 * pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
