"""init_raises: initialize() raises, naming the model's instance."""

import triton_python_backend_utils as pb_utils  # noqa: F401


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError(f"init_raises model: cannot start {args['model_instance_name']}")

    def execute(self, requests):
        return []
