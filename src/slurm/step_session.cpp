// A step's caps and energy through zeusd, and its state file (step_session.hpp).
#include "slurm/step_session.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/proc_stat.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::slurm {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string id_list(const std::vector<int>& ids) {
  std::string out;
  for (const int id : ids) {
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(id);
  }
  return out;
}

// A JSON answer of zeusd's to GET `route`; a zeus::Error when it is not JSON.
json parse_answer(const std::string& route, const std::string& body) {
  try {
    return json::parse(body);
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kIo, "zeusd's answer to " + route + " is not JSON (" +
                                    std::string(text::json_error_text(error.what())) + ")");
  }
}

// GET `route`?gpu_ids=... -> {"<id>": {<field>: value}} as a map.
std::map<int, std::uint64_t> read_field(device::ZeusdConnection& daemon, const std::string& route,
                                        const std::string& field, const std::vector<int>& ids) {
  std::map<int, std::uint64_t> values;
  if (ids.empty()) {
    return values;
  }
  const json body =
      parse_answer(route, daemon.get("read " + field, route + "?gpu_ids=" + id_list(ids)));
  for (const int id : ids) {
    const auto gpu = body.find(std::to_string(id));
    if (gpu == body.end() || !gpu->contains(field) || !(*gpu)[field].is_number_unsigned()) {
      throw Error(ErrorKind::kUnknown, "zeusd's answer to " + route + " has no " + field +
                                           " for GPU " + std::to_string(id));
    }
    values[id] = (*gpu)[field].get<std::uint64_t>();
  }
  return values;
}

void set_limit(device::ZeusdConnection& daemon, const std::vector<int>& ids, std::uint32_t mw) {
  daemon.post(
      "set the power limit of GPU " + id_list(ids) + " to " + std::to_string(mw / 1000) + " W",
      "/gpu/set_power_limit?gpu_ids=" + id_list(ids) + "&power_limit_mw=" + std::to_string(mw) +
          "&block=true");
}

// Puts back the GPUs `state` capped that still hold its cap; a line per GPU.
std::vector<std::string> put_back(device::ZeusdConnection& daemon, const StepState& state) {
  std::vector<int> capped;
  for (const StepGpu& gpu : state.gpus) {
    if (gpu.capped_here && gpu.cap_mw) {
      capped.push_back(gpu.index);
    }
  }
  std::vector<std::string> lines;
  if (capped.empty()) {
    return lines;
  }
  const auto now = read_field(daemon, "/gpu/get_power_limit", "power_limit_mw", capped);
  std::map<std::uint32_t, std::vector<int>> by_prior;
  for (const StepGpu& gpu : state.gpus) {
    if (gpu.capped_here && gpu.cap_mw && now.at(gpu.index) == *gpu.cap_mw) {
      by_prior[gpu.prior_power_limit_mw].push_back(gpu.index);
    }
  }
  for (const auto& [prior, ids] : by_prior) {
    set_limit(daemon, ids, prior);
    for (const int id : ids) {
      lines.push_back("GPU " + std::to_string(id) + " put back to " + std::to_string(prior / 1000) +
                      " W");
    }
  }
  return lines;
}

json to_json(const StepState& state) {
  json gpus = json::array();
  for (const StepGpu& gpu : state.gpus) {
    gpus.push_back(
        {{"index", gpu.index},
         {"start_energy_mj", gpu.start_energy_mj ? json(*gpu.start_energy_mj) : json(nullptr)},
         {"prior_power_limit_mw", gpu.prior_power_limit_mw},
         {"cap_mw", gpu.cap_mw ? json(*gpu.cap_mw) : json(nullptr)},
         {"capped_here", gpu.capped_here}});
  }
  json out = {
      {"job_id", state.job_id},
      {"step", state.step},
      {"node", state.node},
      {"uid", state.uid},
      {"owner_pid", state.owner_pid},
      {"owner_start_time", state.owner_start_time ? json(*state.owner_start_time) : json(nullptr)},
      {"zeusd", state.zeusd},
      {"start_unix_s", state.start_unix_s},
      {"start_monotonic_s", state.start_monotonic_s},
      {"gpus", std::move(gpus)}};
  if (state.note) {
    out["note"] = *state.note;
  }
  return out;
}

StepState from_json(const json& in) {
  StepState state;
  state.job_id = in.at("job_id").get<std::uint32_t>();
  state.step = in.at("step").get<std::string>();
  state.node = in.at("node").get<std::string>();
  state.uid = in.at("uid").get<uid_t>();
  state.owner_pid = in.at("owner_pid").get<pid_t>();
  if (const auto it = in.find("owner_start_time"); it != in.end() && it->is_number_unsigned()) {
    state.owner_start_time = it->get<std::uint64_t>();
  }
  state.zeusd = in.at("zeusd").get<std::string>();
  state.start_unix_s = in.at("start_unix_s").get<double>();
  state.start_monotonic_s = in.at("start_monotonic_s").get<double>();
  for (const json& gpu : in.at("gpus")) {
    StepGpu entry;
    entry.index = gpu.at("index").get<int>();
    if (!gpu.at("start_energy_mj").is_null()) {
      entry.start_energy_mj = gpu.at("start_energy_mj").get<std::uint64_t>();
    }
    entry.prior_power_limit_mw = gpu.at("prior_power_limit_mw").get<std::uint32_t>();
    if (!gpu.at("cap_mw").is_null()) {
      entry.cap_mw = gpu.at("cap_mw").get<std::uint32_t>();
    }
    entry.capped_here = gpu.at("capped_here").get<bool>();
    state.gpus.push_back(entry);
  }
  if (in.contains("note") && in["note"].is_string()) {
    state.note = in["note"].get<std::string>();
  }
  return state;
}

void add_note(std::optional<std::string>& note, const std::string& text) {
  note = note ? *note + "; " + text : text;
}

}  // namespace

double monotonic_s() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

bool owner_alive(const StepState& state) {
  return state.owner_pid > 0 && process_alive(state.owner_pid, state.owner_start_time);
}

std::string state_file_path(const std::string& state_dir, std::uint32_t job_id,
                            const std::string& step) {
  return state_dir + "/job-" + std::to_string(job_id) + ".step-" + step + ".json";
}

void write_step_state(const std::string& state_dir, const StepState& state) {
  std::error_code ignored;
  fs::create_directories(state_dir, ignored);
  ::chmod(state_dir.c_str(), 0755);
  const std::string path = state_file_path(state_dir, state.job_id, state.step);
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << to_json(state).dump() << '\n';
    if (!out) {
      throw Error(ErrorKind::kIo,
                  "cannot write the step state " + temporary + ": " + std::strerror(errno));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    throw Error(ErrorKind::kIo,
                "cannot write the step state " + path + ": " + std::strerror(error));
  }
}

void remove_step_state(const std::string& state_dir, const StepState& state) {
  std::remove(state_file_path(state_dir, state.job_id, state.step).c_str());
}

std::vector<StepState> read_step_states(const std::string& state_dir, std::size_t max_files) {
  std::vector<StepState> states;
  std::error_code error;
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(state_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("job-", 0) != 0 || entry.path().extension() != ".json" ||
        !entry.is_regular_file(error)) {
      continue;
    }
    if (++files > max_files) {
      break;
    }
    try {
      std::ifstream in(entry.path());
      states.push_back(from_json(json::parse(in)));
    } catch (const std::exception&) {
      continue;  // half-written by a crash, or not ours
    }
  }
  return states;
}

StepState begin_step(const SiteConfig& site, device::ZeusdConnection& daemon, StepState identity,
                     const std::vector<int>& gpus, std::optional<std::uint32_t> cap_w) {
  StepState state = std::move(identity);

  // Which GPUs have an energy counter (zeusd's /discover).
  const json discovered = parse_answer("/discover", daemon.get("discover the GPUs", "/discover"));
  std::set<int> with_counter;
  std::set<int> known;
  try {
    for (const json& gpu : discovered.at("gpus").get<std::vector<json>>()) {
      const int id = gpu.at("id").get<int>();
      known.insert(id);
      if (gpu.value("cumulative_energy_available", false)) {
        with_counter.insert(id);
      }
    }
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kIo, "zeusd's answer to /discover lists no GPUs this can read (" +
                                    std::string(text::json_error_text(error.what())) + ")");
  }
  std::vector<int> present;
  std::vector<int> counted;
  for (const int id : gpus) {
    if (!known.count(id)) {
      add_note(state.note, "GPU " + std::to_string(id) + " is not one of zeusd's GPUs (" +
                               std::to_string(known.size()) + " known): not measured or capped");
      continue;
    }
    present.push_back(id);
    if (with_counter.count(id)) {
      counted.push_back(id);
    }
  }
  const auto limits = read_field(daemon, "/gpu/get_power_limit", "power_limit_mw", present);

  // Caps already in force: this job's earlier steps keep theirs; another job's are not touched.
  std::map<int, std::pair<std::uint32_t, std::uint32_t>> held;  // gpu -> (job, cap_mw)
  for (const StepState& other : read_step_states(site.state_dir)) {
    if ((other.job_id == state.job_id && other.step == state.step) || !owner_alive(other)) {
      continue;
    }
    for (const StepGpu& gpu : other.gpus) {
      if (gpu.capped_here && gpu.cap_mw) {
        held[gpu.index] = {other.job_id, *gpu.cap_mw};
      }
    }
  }

  std::vector<int> to_cap;
  const bool capping = cap_w.has_value();
  const std::uint32_t cap_mw = cap_w.value_or(0) * 1000;
  if (capping && !present.empty()) {
    const auto minimum =
        read_field(daemon, "/gpu/get_power_limit_constraints", "min_power_limit_mw", present);
    const auto maximum =
        read_field(daemon, "/gpu/get_power_limit_constraints", "max_power_limit_mw", present);
    for (const int id : present) {
      const std::string gpu = "GPU " + std::to_string(id);
      if (cap_mw < minimum.at(id) || cap_mw > maximum.at(id)) {
        add_note(state.note, gpu + " cannot be capped at " + std::to_string(*cap_w) +
                                 " W (its range is " + std::to_string(minimum.at(id) / 1000) + "-" +
                                 std::to_string(maximum.at(id) / 1000) + " W)");
      } else if (const auto it = held.find(id); it != held.end()) {
        if (it->second.first != state.job_id) {
          add_note(state.note, gpu + " is capped by job " + std::to_string(it->second.first) +
                                   ", which shares it: left as it is");
        } else if (it->second.second != cap_mw) {
          add_note(state.note, gpu + " keeps this job's cap of " +
                                   std::to_string(it->second.second / 1000) +
                                   " W, set by an earlier step still running");
        }
      } else if (limits.at(id) != cap_mw) {
        to_cap.push_back(id);
      }
    }
  }
  // The step starts when the counters are read (the middle of that request), not before the
  // requests above: their time is not in the energy, and would bias the average power low.
  timespec wall{};
  clock_gettime(CLOCK_REALTIME, &wall);
  state.start_unix_s = static_cast<double>(wall.tv_sec) + static_cast<double>(wall.tv_nsec) * 1e-9;
  const double before_read = monotonic_s();
  const auto energies = read_field(daemon, "/gpu/get_cumulative_energy", "energy_mj", counted);
  state.start_monotonic_s = (before_read + monotonic_s()) / 2.0;
  for (const int id : present) {
    StepGpu gpu;
    gpu.index = id;
    if (const auto it = energies.find(id); it != energies.end()) {
      gpu.start_energy_mj = it->second;
    }
    gpu.prior_power_limit_mw = limits.at(id);
    gpu.capped_here = std::find(to_cap.begin(), to_cap.end(), id) != to_cap.end();
    // The cap in force: this step's, an earlier step's of this job, or the limit already equal
    // to the cap asked for; nullopt when the GPU runs uncapped by zeus.
    if (const auto it = held.find(id); it != held.end() && it->second.first == state.job_id) {
      gpu.cap_mw = it->second.second;
    } else if (capping && (gpu.capped_here || limits.at(id) == cap_mw)) {
      gpu.cap_mw = cap_mw;
    }
    state.gpus.push_back(gpu);
  }
  // The state file before the write: a step killed right after it is still put back by the
  // epilog.
  write_step_state(site.state_dir, state);
  if (!to_cap.empty()) {
    try {
      set_limit(daemon, to_cap, cap_mw);
    } catch (const Error& error) {
      // Measured all the same; not capped, and the note says why.
      for (StepGpu& gpu : state.gpus) {
        if (gpu.capped_here) {
          gpu.capped_here = false;
          gpu.cap_mw.reset();
        }
      }
      add_note(state.note, std::string("not capped: ") + error.what());
      write_step_state(site.state_dir, state);
    }
  }
  return state;
}

std::vector<int> uncounted_gpus(const StepState& state) {
  std::vector<int> ids;
  for (const StepGpu& gpu : state.gpus) {
    if (!gpu.start_energy_mj) {
      ids.push_back(gpu.index);
    }
  }
  return ids;
}

StepRecord measure_step(device::ZeusdConnection& daemon, const StepState& state,
                        const std::map<int, double>& polled_j) {
  StepRecord record;
  record.step = state.step;
  record.node = state.node;
  record.start_unix_s = state.start_unix_s;
  record.note = state.note;
  std::vector<int> counted;
  for (const StepGpu& gpu : state.gpus) {
    if (gpu.start_energy_mj) {
      counted.push_back(gpu.index);
    }
  }
  const double before_read = monotonic_s();
  const auto energies = read_field(daemon, "/gpu/get_cumulative_energy", "energy_mj", counted);
  record.duration_s = (before_read + monotonic_s()) / 2.0 - state.start_monotonic_s;
  const double duration = record.duration_s;
  std::size_t polled = 0;
  for (const StepGpu& gpu : state.gpus) {
    GpuUsage usage;
    usage.power_limit_w =
        gpu.cap_mw ? std::optional<std::uint32_t>(*gpu.cap_mw / 1000) : std::nullopt;
    if (gpu.capped_here) {
      usage.prior_power_limit_w = gpu.prior_power_limit_mw / 1000;
    }
    if (!gpu.start_energy_mj) {
      const auto it = polled_j.find(gpu.index);
      if (it == polled_j.end()) {
        add_note(record.note, "GPU " + std::to_string(gpu.index) +
                                  " has no energy counter and its power was not polled: no "
                                  "figure for it");
        continue;
      }
      usage.energy_j = it->second;
      usage.average_power_w = duration > 0.0 ? usage.energy_j / duration : 0.0;
      record.gpus[gpu.index] = usage;
      ++polled;
      continue;
    }
    const std::uint64_t end = energies.at(gpu.index);
    if (end < *gpu.start_energy_mj) {
      add_note(record.note, "GPU " + std::to_string(gpu.index) +
                                "'s energy counter went backwards (GPU reset or zeusd "
                                "restarted): no figure for it");
      continue;
    }
    usage.energy_j = static_cast<double>(end - *gpu.start_energy_mj) / 1000.0;
    usage.average_power_w = duration > 0.0 ? usage.energy_j / duration : 0.0;
    record.gpus[gpu.index] = usage;
  }
  if (polled > 0) {
    record.source = polled == record.gpus.size() ? "polled" : "counter+polled";
  }
  return record;
}

StepRecord end_step(const SiteConfig& site, device::ZeusdConnection& daemon, const StepState& state,
                    const std::map<int, double>& polled_j) {
  StepRecord record = measure_step(daemon, state, polled_j);
  put_back(daemon, state);
  remove_step_state(site.state_dir, state);
  return record;
}

std::vector<std::string> restore_leftovers(const SiteConfig& site, device::ZeusdConnection& daemon,
                                           std::uint32_t job_id) {
  std::vector<std::string> lines;
  for (const StepState& state : read_step_states(site.state_dir)) {
    if (state.job_id != job_id && owner_alive(state)) {
      continue;
    }
    for (const std::string& line : put_back(daemon, state)) {
      lines.push_back("job " + std::to_string(state.job_id) + " step " + state.step + ": " + line);
    }
    remove_step_state(site.state_dir, state);
  }
  std::remove((site.state_dir + "/job-" + std::to_string(job_id) + ".lock").c_str());
  return lines;
}

JobLock::JobLock(const std::string& state_dir, std::uint32_t job_id) {
  std::error_code ignored;
  fs::create_directories(state_dir, ignored);
  const std::string path = state_dir + "/job-" + std::to_string(job_id) + ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_EX);
  }
}

JobLock::~JobLock() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

}  // namespace zeus::slurm
