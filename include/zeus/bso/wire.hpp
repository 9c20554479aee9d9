// The batch-size-optimizer wire format (docs/bso-server.md), shared by the server and the client:
// the reference's pydantic models as C++ structs, parsed with the reference's lax rules (unknown
// fields ignored, numbers in strings coerced, floats truncated to ints) and its validation
// constraints, and written with the reference's key order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/error.hpp"

namespace zeus::bso {

// JobSpecFromClient: the job's parameters plus its GPU configuration (the reference's 18 fields),
// and one of ours, `policy`.
struct JobSpec {
  double max_power_w = 0.0;  // the GPUs' maximum power limit (W) times their number
  int number_of_gpus = 0;
  std::string gpu_model;
  std::optional<std::string> job_id;  // unset: the server assigns "<prefix>-<8 hex>"
  std::string job_id_prefix;
  std::vector<int> batch_sizes;  // sorted ascending by validation
  int default_batch_size = 0;
  double eta_knob = 0.5;
  std::optional<double> beta_knob = 2.0;  // unset: no early stopping
  double target_metric = 0.5;
  bool higher_is_better_metric = true;
  int max_epochs = 100;
  int num_pruning_rounds = 2;
  int window_size = 0;  // <= 0: all history
  double mab_prior_mean = 0.0;
  double mab_prior_precision = 0.0;
  int mab_num_explorations = 2;
  std::optional<std::int64_t> mab_seed;
  // Beyond the reference: the batch-size policy by name ("zeus", the paper's, or "low-regret").
  // Unset: the server's default (`zeus bso serve --policy`); the server stores the one it chose.
  // Not written when unset, so that a request without it is the reference's byte for byte. The
  // wire only checks that it is a string; the server refuses unknown names (422).
  std::optional<std::string> policy;

  // Field by field, numbers by value (what decides 200 vs 409 on re-registration).
  bool operator==(const JobSpec& other) const = default;
};

struct TrialId {
  std::string job_id;
  int batch_size = 0;
  int trial_number = 0;
};

// One epoch's report: time (s) and energy (J, all GPUs) are cumulative since training began.
struct TrainingResult {
  TrialId trial;
  double time_s = 0.0;
  double energy_j = 0.0;
  double metric = 0.0;
  int current_epoch = 0;
};

struct ReportResponse {
  bool stop_train = false;
  bool converged = false;
  std::string message;
};

// One entry of a 422 response's "detail" list, in FastAPI's shape.
struct FieldError {
  nlohmann::json loc;  // e.g. ["body", "max_power"]
  std::string msg;
  std::string type;
  nlohmann::json ctx;  // null when absent
};

// Bad input caught by validation: becomes HTTP 422 {"detail": [...]}. Text in the errors that is
// not valid UTF-8 (client bytes quoted in a message) is cleaned (U+FFFD), so that to_json() can
// always be dumped.
class ValidationError : public Error {
 public:
  explicit ValidationError(std::vector<FieldError> errors);
  const std::vector<FieldError>& errors() const noexcept { return errors_; }
  // {"detail": [{"loc": [...], "msg": ..., "type": ..., ["ctx": ...]}, ...]}
  nlohmann::ordered_json to_json() const;

 private:
  std::vector<FieldError> errors_;
};

// Job ids are path segments (GET /jobs/{job_id}) and database keys: at most this many bytes of
// UTF-8, without '/' or control characters. A job_id_prefix leaves room for the "-<8 hex>" that
// the server appends when it generates an id.
inline constexpr std::size_t kMaxJobIdBytes = 256;
inline constexpr std::size_t kMaxJobIdPrefixBytes = kMaxJobIdBytes - 9;

// A spec's lists and free text are bounded too, so that a job's stored size is (a few tens of
// KiB at most, docs/security.md): at most this many batch sizes, and this many bytes of
// gpu_model; and a window of at most this many runs per batch size (the policy keeps that many
// costs per arm, so the window bounds a job's state as the list does).
inline constexpr std::size_t kMaxBatchSizes = 4096;
inline constexpr std::size_t kMaxGpuModelBytes = 256;
inline constexpr int kMaxWindowSize = 1000;

// Why `id` cannot be a job id (empty, longer than `max_bytes`, not UTF-8, a '/' or a control
// character), as a sentence for an error message; empty when it can.
std::string job_id_problem(const std::string& id, std::size_t max_bytes = kMaxJobIdBytes);

// Parses a request body. `where` is the first element of each error's "loc" ("body"). Throws
// ValidationError listing every bad field (not only the first). `check_job_ids` applies
// job_id_problem to job_id and job_id_prefix, and the limits above; off for rows stored before
// those rules existed.
JobSpec job_spec_from_json(const nlohmann::json& body, const std::string& where = "body",
                           bool check_job_ids = true);
TrialId trial_id_from_json(const nlohmann::json& body, const std::string& where = "body");
TrainingResult training_result_from_json(const nlohmann::json& body,
                                         const std::string& where = "body");
ReportResponse report_response_from_json(const nlohmann::json& body);

// The reference's key order (pydantic's), so responses and requests match it byte for byte
// after compact dumping.
nlohmann::ordered_json to_json(const JobSpec& spec);
nlohmann::ordered_json to_json(const TrialId& trial);
nlohmann::ordered_json to_json(const TrainingResult& result);
nlohmann::ordered_json to_json(const ReportResponse& response);

}  // namespace zeus::bso
