"""init_raises: initialize() raises, naming the model's instance."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError(f"init_raises model: cannot start {args['model_instance_name']}")

    def execute(self, requests):
        return []
