// RAII list of TRITONSERVER_Parameter handles, for the core calls that take
// an array of them (model load, repository registration, metric labels).
#pragma once

#include <vector>

#include "errors.h"
#include "triton_library.h"

namespace tsb {

class ParameterList {
 public:
  ParameterList() = default;
  ParameterList(const ParameterList&) = delete;
  ParameterList& operator=(const ParameterList&) = delete;
  ~ParameterList() {
    for (TRITONSERVER_Parameter* p : params_) triton().ParameterDelete(p);
  }
  // Takes ownership of `p`; INTERNAL when it is null (creation failed).
  void add(TRITONSERVER_Parameter* p) {
    if (p == nullptr) {
      raise(TRITONSERVER_ERROR_INTERNAL, "failed to create a parameter");
    }
    params_.push_back(p);
  }
  const TRITONSERVER_Parameter** data() {
    return const_cast<const TRITONSERVER_Parameter**>(params_.data());
  }
  size_t size() const { return params_.size(); }

 private:
  std::vector<TRITONSERVER_Parameter*> params_;
};

}  // namespace tsb
