// Combining per-process measurements across the processes of a data-parallel job.
#pragma once

#include <functional>
#include <memory>

namespace zeus::runtime {

class Reducer {
 public:
  virtual ~Reducer() = default;
  // The sum over all processes of `value` (every process calls it with its own value).
  virtual double sum(double value) = 0;
  // The maximum over all processes.
  virtual double max(double value) = 0;
  // How many processes take part.
  virtual int world_size() const = 0;
};

// A single process: values are returned unchanged.
class LocalReducer final : public Reducer {
 public:
  double sum(double value) override { return value; }
  double max(double value) override { return value; }
  int world_size() const override { return 1; }
};

// Delegates to callables (the Python bindings pass torch.distributed all_reduce).
class CallbackReducer final : public Reducer {
 public:
  CallbackReducer(std::function<double(double)> sum, std::function<double(double)> max,
                  int world_size)
      : sum_(std::move(sum)), max_(std::move(max)), world_size_(world_size) {}
  double sum(double value) override { return sum_(value); }
  double max(double value) override { return max_(value); }
  int world_size() const override { return world_size_; }

 private:
  std::function<double(double)> sum_;
  std::function<double(double)> max_;
  int world_size_;
};

}  // namespace zeus::runtime
