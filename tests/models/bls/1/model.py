"""bls: OUTPUT0/OUTPUT1 are add_sub's outputs for INPUT0/INPUT1, run as a
BLS request on the model named by TARGET (default "add_sub"; its error
becomes this request's error). With STREAM_COUNT=n it also runs the
decoupled model "streaming" with COUNT=n (exec(decoupled=True)) and
returns the values it streamed as STREAMED."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            target = pb_utils.get_input_tensor_by_name(request, "TARGET")
            name = target.as_numpy()[0].decode() if target is not None else "add_sub"
            inputs = [pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                      pb_utils.get_input_tensor_by_name(request, "INPUT1")]
            answer = pb_utils.InferenceRequest(model_name=name, inputs=inputs,
                                               requested_output_names=["OUTPUT0", "OUTPUT1"]).exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=answer.error()))
                continue
            outputs = [pb_utils.Tensor(n, pb_utils.get_output_tensor_by_name(answer, n).as_numpy())
                       for n in ("OUTPUT0", "OUTPUT1")]
            count = pb_utils.get_input_tensor_by_name(request, "STREAM_COUNT")
            if count is not None:
                streamed = []
                stream = pb_utils.InferenceRequest(
                    model_name="streaming", requested_output_names=["OUT"],
                    inputs=[pb_utils.Tensor("COUNT", count.as_numpy().astype(np.int32))])
                for part in stream.exec(decoupled=True):
                    out = pb_utils.get_output_tensor_by_name(part, "OUT")
                    if out is not None:
                        streamed.append(int(out.as_numpy()[0]))
                outputs.append(pb_utils.Tensor("STREAMED", np.array(streamed, dtype=np.int32)))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
