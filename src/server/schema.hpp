// The server's schema, as an ordered list of migrations shared by the SQLite and PostgreSQL
// stores. Migration i (0-based) brings the schema from version i to version i + 1; a store
// applies the missing ones at start-up, in one transaction, and records the version in
// zeus_schema. Never edit a released migration: append a new one.
#pragma once

#include <string_view>
#include <vector>

namespace zeus::server::schema {

// Portable SQL: BIGINT, DOUBLE PRECISION and BOOLEAN mean what they should on both (SQLite maps
// them to INTEGER, REAL and 0/1 by type affinity). CHECKs use OR rather than IN (...): SQLite
// evaluates an IN list of three or more through a temporary b-tree built at every insert, which
// cost more than the rest of the insert.
inline const std::vector<std::string_view>& migrations() {
  static const std::vector<std::string_view> all = {
      // 1: jobs, their candidate batch sizes and their trials.
      R"sql(
CREATE TABLE bso_job (
  job_id TEXT PRIMARY KEY,
  job_id_prefix TEXT NOT NULL,
  spec TEXT NOT NULL,
  policy_state TEXT NOT NULL,
  stage TEXT NOT NULL CHECK (stage = 'Pruning' OR stage = 'MAB'),
  min_cost DOUBLE PRECISION,
  min_cost_batch_size INTEGER NOT NULL,
  created_ms BIGINT NOT NULL
);
CREATE INDEX bso_job_prefix ON bso_job (job_id_prefix);
CREATE TABLE bso_batch_size (
  job_id TEXT NOT NULL REFERENCES bso_job (job_id) ON DELETE CASCADE,
  batch_size INTEGER NOT NULL,
  PRIMARY KEY (job_id, batch_size)
);
CREATE TABLE bso_trial (
  job_id TEXT NOT NULL,
  trial_number INTEGER NOT NULL,
  batch_size INTEGER NOT NULL,
  type TEXT NOT NULL CHECK (type = 'Exploration' OR type = 'Concurrent' OR type = 'MAB'),
  status TEXT NOT NULL
    CHECK (status = 'Dispatched' OR status = 'Succeeded' OR status = 'Failed'),
  start_ms BIGINT NOT NULL,
  end_ms BIGINT,
  time_s DOUBLE PRECISION,
  energy_j DOUBLE PRECISION,
  metric DOUBLE PRECISION,
  epochs INTEGER,
  converged BOOLEAN,
  PRIMARY KEY (job_id, trial_number),
  FOREIGN KEY (job_id, batch_size) REFERENCES bso_batch_size (job_id, batch_size)
    ON DELETE CASCADE,
  CHECK ((status = 'Succeeded') = (end_ms IS NOT NULL AND time_s IS NOT NULL AND
         energy_j IS NOT NULL AND converged IS NOT NULL) OR status = 'Failed'),
  CHECK (status <> 'Failed' OR (end_ms IS NOT NULL AND time_s IS NULL))
);
)sql",
  };
  return all;
}

// The bookkeeping table (created before the migrations run).
inline constexpr std::string_view kVersionTable =
    "CREATE TABLE IF NOT EXISTS zeus_schema (version INTEGER NOT NULL)";

}  // namespace zeus::server::schema
