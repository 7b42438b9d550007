#include "custom_metrics.h"

#include "errors.h"
#include "parameter_list.h"
#include "triton_library.h"

namespace tsb {

MetricFamily::MetricFamily(int kind, const std::string& name,
                           const std::string& description)
    : kind_(kind) {
  check(triton().MetricFamilyNew(&family_,
                                 static_cast<TRITONSERVER_MetricKind>(kind),
                                 name.c_str(), description.c_str()),
        ("MetricFamily '" + name + "'").c_str());
}

MetricFamily::~MetricFamily() {
  if (family_ != nullptr) {
    ignore_error(triton().MetricFamilyDelete(family_));
  }
}

Metric::Metric(std::shared_ptr<MetricFamily> family,
               const std::vector<std::pair<std::string, std::string>>& labels)
    : family_(std::move(family)) {
  const TritonApi& api = triton();
  ParameterList params;
  for (const auto& [key, value] : labels) {
    params.add(api.ParameterNew(key.c_str(), TRITONSERVER_PARAMETER_STRING,
                                value.c_str()));
  }
  check(api.MetricNew(&metric_, family_->get(), params.data(), params.size()),
        "Metric");
}

Metric::~Metric() {
  if (metric_ != nullptr) {
    ignore_error(triton().MetricDelete(metric_));
  }
}

double Metric::value() const {
  double v = 0;
  check(triton().MetricValue(metric_, &v));
  return v;
}

void Metric::increment(double by) {
  check(triton().MetricIncrement(metric_, by));
}

void Metric::set_value(double value) {
  check(triton().MetricSet(metric_, value));
}

}  // namespace tsb
