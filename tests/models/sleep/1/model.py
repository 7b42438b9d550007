"""sleep: sleeps SECONDS, then returns OUT = SECONDS.

Used for timeout and cancellation tests. It sleeps in small steps and, when
the request has been cancelled (request.is_cancelled()), stops early and
returns a "cancelled" error response instead; unless the request parameter
"ignore_cancellation" is true: then it sleeps on, as a model that never
looks at cancellation does.
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils

STEP_S = 0.01


def _ignores_cancellation(request):
    parameters = json.loads(request.parameters() or "{}")
    return parameters.get("ignore_cancellation") is True


def _is_cancelled(request):
    check = getattr(request, "is_cancelled", None)
    return bool(check()) if check is not None else False


def _cancelled_error():
    code = getattr(pb_utils.TritonError, "CANCELLED", None)
    if code is None:
        return pb_utils.TritonError("cancelled")
    return pb_utils.TritonError("cancelled", code)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seconds = pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()
            deadline = time.monotonic() + max(float(seconds.flatten()[0]), 0.0)
            cancelled = False
            heeds_cancellation = not _ignores_cancellation(request)
            while True:
                if heeds_cancellation and _is_cancelled(request):
                    cancelled = True
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                time.sleep(min(STEP_S, remaining))
            if cancelled:
                responses.append(pb_utils.InferenceResponse(error=_cancelled_error()))
            else:
                out = pb_utils.Tensor("OUT", seconds.astype(np.float32))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
