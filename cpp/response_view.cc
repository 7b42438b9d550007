#include "response_view.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <utility>

namespace nb = nanobind;

namespace tsb {
namespace {

// What the view hands out, taken once from tritonserver._api: DataType and
// MemoryType members indexed by value (members, not ints, with no
// per-output lookup in Python) and the MemoryBuffer class. Never freed (no
// Python after teardown).
struct PythonTypes {
  nb::tuple data_types, memory_types;
  nb::object memory_buffer;
};

const PythonTypes& python_types() {
  static PythonTypes* types = [] {
    nb::module_ enums = nb::module_::import_("tritonserver._api._enums");
    auto* t = new PythonTypes();
    t->memory_buffer = nb::module_::import_("tritonserver._api._memorybuffer")
                           .attr("MemoryBuffer");
    auto as_tuple = [](nb::handle members) {
      PyObject* t = PySequence_Tuple(members.ptr());
      if (t == nullptr) throw nb::python_error();
      return nb::steal<nb::tuple>(t);
    };
    t->data_types = as_tuple(enums.attr("DataType"));
    t->memory_types = as_tuple(enums.attr("MemoryType"));
    return t;
  }();
  return *types;
}

nb::object enum_member(const nb::tuple& table, int value) {
  if (value >= 0 && value < PyTuple_Size(table.ptr())) {
    return nb::borrow(PyTuple_GetItem(table.ptr(), value));
  }
  return nb::int_(value);
}

nb::object to_python(const ParameterValue& v) {
  if (auto* s = std::get_if<std::string>(&v)) return nb::str(s->c_str());
  if (auto* i = std::get_if<int64_t>(&v)) return nb::int_(*i);
  if (auto* b = std::get_if<bool>(&v)) return nb::bool_(*b);
  if (auto* d = std::get_if<double>(&v)) return nb::float_(*d);
  const std::string& bytes = std::get<Bytes>(v).data;
  return nb::bytes(bytes.data(), bytes.size());
}

nb::dict parameters_dict(const ResponseData& data) {
  nb::dict d;
  for (const auto& [k, v] : data.parameters) d[k.c_str()] = to_python(v);
  return d;
}

}  // namespace

BufferHandle::~BufferHandle() {
  if (ref && ref->memory_type != TRITONSERVER_MEMORY_CPU &&
      ref->refs.load(std::memory_order_acquire) == 1) {
    nb::gil_scoped_release release;
    ref = BufferRef();
  }
}

nb::object memory_buffer(BufferRef buffer, size_t size) {
  const PythonTypes& types = python_types();
  const OutputBuffer& b = *buffer.get();
  // MemoryBuffer(data_ptr, memory_type, memory_type_id, size, owner)
  nb::object args[] = {
      nb::int_(reinterpret_cast<uintptr_t>(b.data)),
      enum_member(types.memory_types, static_cast<int>(b.memory_type)),
      nb::int_(b.memory_type_id), nb::int_(size),
      nb::cast(BufferHandle(std::move(buffer), size))};
  PyObject* raw[] = {args[0].ptr(), args[1].ptr(), args[2].ptr(),
                     args[3].ptr(), args[4].ptr()};
  PyObject* result = PyObject_Vectorcall(types.memory_buffer.ptr(), raw, 5, nullptr);
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

nb::tuple ResponseHandle::fields() const {
  const ResponseData& d = *data;
  const PythonTypes& types = python_types();
  nb::list outputs;
  for (const OutputTensor& t : d.outputs) {
    outputs.append(nb::make_tuple(
        t.name, enum_member(types.data_types, static_cast<int>(t.datatype)),
        nb::cast(t.shape), memory_buffer(t.buffer, t.byte_size)));
  }
  nb::object error = nb::none();
  if (d.has_error) {
    error = nb::make_tuple(static_cast<int>(d.error_code), d.error_message);
  }
  return nb::make_tuple(d.request_id, parameters_dict(d), d.final,
                        std::move(error), std::move(outputs));
}

nb::object response_to_python(ResponsePtr response) {
  if (!response) return nb::none();
  return nb::cast(ResponseHandle{std::move(response)});
}

nb::object copy_buffer(uintptr_t src, size_t size, int src_type,
                       int memory_type, int64_t memory_type_id) {
  BufferRef copy;
  {
    nb::gil_scoped_release release;
    copy = buffer_copy(reinterpret_cast<const void*>(src), size,
                       static_cast<TRITONSERVER_MemoryType>(src_type),
                       static_cast<TRITONSERVER_MemoryType>(memory_type),
                       memory_type_id);
  }
  return memory_buffer(std::move(copy), size);
}

nb::object dispatch_pop_from_python(double timeout_s) {
  std::pair<uint64_t, ResponsePtr> item;
  {
    nb::gil_scoped_release release;
    item = dispatch_pop(timeout_s);
  }
  if (!item.second) return nb::none();
  return nb::make_tuple(item.first, response_to_python(std::move(item.second)));
}

}  // namespace tsb
