"""execute_raises: execute() raises ValueError("execute_raises model: bad
batch of N"), so each request gets an error response with that message."""


class TritonPythonModel:
    def execute(self, requests):
        raise ValueError(f"execute_raises model: bad batch of {len(requests)}")
