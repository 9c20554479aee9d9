// Row encodings shared by the SQLite and PostgreSQL stores.
#pragma once

#include <string>

#include "zeus/bso/wire.hpp"
#include "zeus/server/store.hpp"

namespace zeus::server::rows {

// A job's spec is stored as its wire JSON (the 18 keys).
inline std::string spec_to_text(const bso::JobSpec& spec) {
  return bso::to_json(spec).dump();
}

// Throws StoreError(kCorrupt) when the stored text does not parse.
inline bso::JobSpec spec_from_text(const std::string& text, const std::string& job_id) {
  try {
    return bso::job_spec_from_json(nlohmann::json::parse(text), "stored");
  } catch (const std::exception& error) {
    throw StoreError(StoreFailure::kCorrupt,
                     "the stored spec of job " + job_id + " is unreadable: " + error.what());
  }
}

}  // namespace zeus::server::rows
