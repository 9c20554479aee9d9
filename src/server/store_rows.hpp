// Row encodings shared by the SQLite and PostgreSQL stores.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

#include "server/store.hpp"
#include "zeus/bso/wire.hpp"

namespace zeus::server::rows {

// A failure of the storage, remembered for Store::health() until a write succeeds.
struct StorageFailure {
  std::string message;
  bool corruption = false;  // only a real write clears it: a probe proves nothing there
};

// A job's spec is stored as its wire JSON (the 18 keys).
inline std::string spec_to_text(const bso::JobSpec& spec) {
  return bso::to_json(spec).dump();
}

// Throws StoreError(kCorrupt) when the stored text does not parse. A spec never changes once
// stored, and parsing it is most of the cost of reading a job row: the process remembers the
// specs it parsed last, keyed by their text.
inline bso::JobSpec spec_from_text(const std::string& text, const std::string& job_id) {
  static std::mutex mutex;
  static std::unordered_map<std::string, bso::JobSpec> parsed;
  {
    std::lock_guard lock(mutex);
    if (const auto found = parsed.find(text); found != parsed.end()) {
      return found->second;
    }
  }
  bso::JobSpec spec;
  try {
    // Rows may hold ids registered before the job-id rules existed: still readable.
    spec = bso::job_spec_from_json(nlohmann::json::parse(text), "stored", false);
  } catch (const std::exception& error) {
    throw StoreError(StoreFailure::kCorrupt,
                     "the stored spec of job " + job_id + " is unreadable: " + error.what());
  }
  std::lock_guard lock(mutex);
  if (parsed.size() >= 1024) {
    parsed.clear();
  }
  parsed.emplace(text, spec);
  return spec;
}

}  // namespace zeus::server::rows
