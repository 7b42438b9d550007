#include "api_types.h"

namespace nb = nanobind;

namespace tsb {
namespace {

nb::tuple as_tuple(nb::handle sequence) {
  PyObject* t = PySequence_Tuple(sequence.ptr());
  if (t == nullptr) throw nb::python_error();
  return nb::steal<nb::tuple>(t);
}

}  // namespace

const ApiTypes& api_types() {
  static ApiTypes* types = nullptr;
  if (types == nullptr) {
    auto* t = new ApiTypes();
    nb::module_ enums = nb::module_::import_("tritonserver._api._enums");
    t->data_types = as_tuple(enums.attr("DataType"));
    t->memory_types = as_tuple(enums.attr("MemoryType"));
    t->memory_buffer = nb::module_::import_("tritonserver._api._memorybuffer").attr("MemoryBuffer");
    t->tensor = nb::module_::import_("tritonserver._api._tensor").attr("Tensor");
    t->inference_response =
        nb::module_::import_("tritonserver._api._response").attr("InferenceResponse");
    nb::module_ errors = nb::module_::import_("tritonserver._api._errors");
    t->error_from_code = errors.attr("error_from_code");
    t->cancelled_error = errors.attr("CancelledError");
    t->error_classes = as_tuple(errors.attr("_BY_CODE"));
    t->request_id_name = nb::steal(PyUnicode_InternFromString("request_id"));
    types = t;  // only once complete: a failed import is tried again
  }
  return *types;
}

nb::object enum_member(const nb::tuple& table, int value) {
  if (value >= 0 && value < PyTuple_Size(table.ptr())) {
    return nb::borrow(PyTuple_GetItem(table.ptr(), value));
  }
  return nb::int_(value);
}

}  // namespace tsb
