#include "bindings.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "backend_request.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tsb {
namespace {

// `send` of a BackendRequest or ResponseSender: pb_utils Tensor objects as
// Outputs.
template <typename Sender>
void send_outputs(Sender& self, nb::handle tensors, const ErrorSpec& error,
                  uint32_t flags, const nb::dict& parameters) {
  self.send(Outputs(tensors), error, flags, parameters);
}
constexpr const char* kSendSignature =
    "def send(self, tensors: collections.abc.Iterable[typing.Any], "
    "error: tuple[int, str] | None, flags: int, "
    "parameters: dict[str, str | int | bool]) -> None";

}  // namespace

void bind_python_backend(nb::module_& m, LiveRequests live_requests) {
  m.def("attach_python_backend",
        [live_requests](const std::string& library) {
          return attach_python_backend(library, live_requests);
        },
        "library"_a,
        "Hands the extension's function table to the in-process python backend library at `library`; "
        "'' when done, else why not.");
  nb::class_<BackendRequest>(m, "BackendRequest")
      .def("input_tensor",
           [](nb::handle_t<BackendRequest> self, nb::str name) {
             return nb::cast<BackendRequest&>(self).input_tensor(self, name);
           },
           "name"_a, nb::sig("def input_tensor(self, name: str) -> typing.Any"),
           "The input `name` as a pb_utils Tensor, or None.")
      .def("input_value",
           [](nb::handle_t<BackendRequest> self, nb::str name) {
             return nb::cast<BackendRequest&>(self).input_value(self, name);
           },
           "name"_a, nb::sig("def input_value(self, name: str) -> typing.Any"),
           "The input `name`'s value (an array, or a DeviceArray), or None.")
      .def("send_arrays",
           [](BackendRequest& self, nb::handle arrays, nb::handle datatypes) {
             self.send(Outputs(arrays, datatypes), std::nullopt,
                       TRITONSERVER_RESPONSE_COMPLETE_FINAL, nb::dict());
           },
           "arrays"_a, "datatypes"_a,
           nb::sig("def send_arrays(self, arrays: dict[str, typing.Any], datatypes: dict[str, int]) -> None"),
           "Sends the final response of outputs {name: array} (data types by name).")
      .def("input_names", &BackendRequest::input_names)
      .def("requested_output_names", &BackendRequest::requested_output_names)
      .def("id", &BackendRequest::id)
      .def("correlation_id", &BackendRequest::correlation_id,
           nb::sig("def correlation_id(self) -> int | str"))
      .def("flags", &BackendRequest::flags)
      .def("timeout_us", &BackendRequest::timeout_us)
      .def("parameters", &BackendRequest::parameters,
           nb::sig("def parameters(self) -> dict[str, str | int | bool | float]"))
      .def("is_cancelled", &BackendRequest::is_cancelled)
      .def("send", &send_outputs<BackendRequest>, "tensors"_a, "error"_a.none(),
           "flags"_a, "parameters"_a, nb::sig(kSendSignature))
      .def("fail_if_unanswered", &BackendRequest::fail_if_unanswered,
           "code"_a, "message"_a)
      .def("answer_when_dropped", &BackendRequest::answer_when_dropped,
           "message"_a)
      .def("response_sender", &BackendRequest::response_sender)
      .def("set_release_flags", &BackendRequest::set_release_flags, "flags"_a)
      .def_prop_ro("rescheduled", &BackendRequest::rescheduled)
      .def_prop_ro("final_sent", &BackendRequest::final_sent);
  m.def("send_final_responses", &send_final_responses, "natives"_a, "responses"_a,
        nb::sig("def send_final_responses(natives: collections.abc.Sequence[BackendRequest], "
                "responses: collections.abc.Sequence[typing.Any]) -> tuple[list[int], int | None, list[int]]"));
  nb::class_<ResponseSender>(m, "ResponseSender")
      .def("send", &send_outputs<ResponseSender>, "tensors"_a, "error"_a.none(),
           "flags"_a, "parameters"_a, nb::sig(kSendSignature))
      .def("send_flags", &ResponseSender::send_flags, "flags"_a)
      .def("is_cancelled", &ResponseSender::is_cancelled);
}

}  // namespace tsb
