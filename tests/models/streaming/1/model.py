"""streaming: decoupled model for testing streamed responses and cancellation.

For a request with COUNT=n (and optional DELAY_MS, default 0) it sends n
responses whose OUT is the response index 0..n-1, sleeping DELAY_MS between
them, and then a separate empty response carrying only the FINAL flag (so
COUNT=0 yields just the final flag). If the request is cancelled it stops
early and sends an error response "cancelled" together with the FINAL flag.
"""

import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _cancelled_error():
    code = getattr(pb_utils.TritonError, "CANCELLED", None)
    if code is None:
        return pb_utils.TritonError("cancelled")
    return pb_utils.TritonError("cancelled", code)


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy().flatten()[0])
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
            delay_s = int(delay.as_numpy().flatten()[0]) / 1000.0 if delay is not None else 0.0

            cancelled = False
            for i in range(count):
                if sender.is_cancelled():
                    cancelled = True
                    break
                out = pb_utils.Tensor("OUT", np.array([i], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
                if delay_s > 0 and i < count - 1:
                    time.sleep(delay_s)

            if cancelled or sender.is_cancelled():
                sender.send(pb_utils.InferenceResponse(error=_cancelled_error()), flags=FINAL)
            else:
                sender.send(flags=FINAL)
        # Decoupled models must return None from execute().
        return None
