// The backend wing's Python bindings (BackendRequest, ResponseSender,
// send_final_responses, attach_python_backend), added to the extension
// module by module.cc, which also hands over the one thing this wing takes
// from the client's: the count of the package's requests in flight.
#pragma once

#include <nanobind/nanobind.h>

#include "python_backend.h"

namespace tsb {

void bind_python_backend(nanobind::module_& m, LiveRequests live_requests);

}  // namespace tsb
