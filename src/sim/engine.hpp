// The simulation engine's internals shared by its three drivers (simulator.cpp: sequential
// recurrences; concurrent.cpp: replayed submissions; cell.cpp: many seeds): one training run
// charged from the trace, and the policies that choose each run's configuration.
#pragma once

#include <memory>
#include <optional>

#include "zeus/optimizer/rng.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace zeus::sim::detail {

// What one training run did.
struct Outcome {
  double energy_j = 0.0;
  double time_s = 0.0;
  double cost = 0.0;
  bool reached = false;
  bool never_ran = false;   // early stopping would not even allow one epoch
  int epochs = 0;           // epochs run
  double epoch_cost = 0.0;  // the cost of one steady epoch at the run's power limit
};

struct Choice {
  int trial_id = 0;
  int batch_size = 0;
  int power_limit_w = 0;
  bool profile = false;  // the first epoch profiles every power limit
};

// The trace's point at `power_limit_w`; throws kInvalidArgument when the batch size has none.
const PowerPoint& point_at(const BatchSizeTrace& batch, int power_limit_w);

// Runs one training job: samples a run (seed) of the batch size and charges its epochs, stopping
// early at the cost threshold (predictively: the number of epochs it allows). `runtime_ratio`
// scales energy and time (replayed submissions).
Outcome run_once(const WorkloadTrace& trace, const BatchSizeTrace& batch, const Choice& choice,
                 std::optional<double> threshold, double eta, optimizer::Rng& rng,
                 double runtime_ratio = 1.0);

// Chooses each run's configuration and learns from its outcome.
class Policy {
 public:
  virtual ~Policy() = default;
  virtual Choice decide() = 0;
  // The cost at which the run `decide` just chose is stopped early; nullopt: never.
  virtual std::optional<double> threshold(const Choice& /*choice*/) const { return std::nullopt; }
  virtual void report(const Choice& choice, const Outcome& outcome) = 0;
};
std::unique_ptr<Policy> make_policy(const WorkloadTrace& trace, const PolicyKind& kind,
                                    const SimulationConfig& config);

// config.recurrences, or 2 x |batch sizes| x |power limits| when it is 0.
int default_recurrences(const WorkloadTrace& trace, const SimulationConfig& config);
// Throws kInvalidArgument for a bad eta or max_tries, an empty trace, or a b0 that never
// reaches the target.
void check_config(const WorkloadTrace& trace, const SimulationConfig& config);
// The stream the runs (seeds of the trace) are drawn from.
optimizer::Rng run_rng(const SimulationConfig& config);

}  // namespace zeus::sim::detail

namespace zeus::sim {

// The engine's pieces, spelled unqualified in the simulator's sources (the only includers of this
// internal header).
using detail::check_config;
using detail::Choice;
using detail::default_recurrences;
using detail::make_policy;
using detail::Outcome;
using detail::point_at;
using detail::Policy;
using detail::run_once;
using detail::run_rng;

}  // namespace zeus::sim
