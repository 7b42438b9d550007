// User-defined metric families and metrics (counters, gauges) that Triton
// reports alongside its own in Server.metrics().
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "triton_api.h"

namespace tsb {

class MetricFamily {
 public:
  MetricFamily(int kind, const std::string& name,
               const std::string& description);
  ~MetricFamily();
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;
  TRITONSERVER_MetricFamily* get() const noexcept { return family_; }
  int kind() const noexcept { return kind_; }

 private:
  TRITONSERVER_MetricFamily* family_ = nullptr;
  int kind_;
};

class Metric {
 public:
  Metric(std::shared_ptr<MetricFamily> family,
         const std::vector<std::pair<std::string, std::string>>& labels);
  ~Metric();
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;
  double value() const;
  void increment(double by);
  void set_value(double value);
  int kind() const noexcept { return family_->kind(); }

 private:
  std::shared_ptr<MetricFamily> family_;  // must outlive the metric
  TRITONSERVER_Metric* metric_ = nullptr;
};

}  // namespace tsb
