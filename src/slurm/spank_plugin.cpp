// zeus's SPANK plugin (docs/slurm.md): the Slurm side only. Options and site arguments are parsed
// by site_config.hpp, caps and energy are step_session.hpp's, AdminComment's JSON is
// step_record.hpp's; this file calls Slurm (spank.h, and the slurm.h API that srun, sbatch and
// slurmstepd already carry) and nothing else.
//
// Where each thing happens (Slurm 22.05; context in brackets):
// - slurm_spank_init [all]: the site's arguments; --zeus-power-limit and --zeus-energy registered.
// - option callbacks [srun/sbatch/salloc, then slurmstepd]: values checked, a bad one refuses the
//   job at submission.
// - slurm_spank_init_post_opt [slurmstepd, root, before the tasks]: the step's GPUs (checked
// against
//   the job's allocation from slurmctld), caps through zeusd (ledger owner: this slurmstepd),
//   counters read.
// - slurm_spank_task_init [each task, before exec]: task 0 prints why a step is not capped.
// - slurm_spank_task_exit [slurmstepd, after its last task]: counters read, caps put back, the
//   record merged into AdminComment; a batch step's summary appended to its stderr file.
// - slurm_spank_exit [slurmstepd]: the same if no task ran. [srun]: the summary of the
//   step, read back from AdminComment, printed to srun's stderr.
// - slurm_spank_job_epilog [slurmd's epilog, root]: the backstop for steps that did not end.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/proc_stat.hpp"
#include "common/text.hpp"
#include "device/zeusd_connection.hpp"
#include "slurm/gres.hpp"
#include "slurm/polled_energy.hpp"
#include "slurm/site_config.hpp"
#include "slurm/slurm_calls.hpp"
#include "slurm/step_record.hpp"
#include "slurm/step_session.hpp"
#include "zeus/common/error.hpp"

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
const char plugin_name[] = "zeus";
const char plugin_type[] = "spank";
const unsigned int plugin_version = SLURM_VERSION_NUMBER;
const unsigned int spank_plugin_version = 1;
}

namespace {

using zeus::slurm::SiteConfig;

struct PluginState {
  std::optional<SiteConfig> site;
  std::string site_error;  // why the site's arguments were refused
  std::optional<zeus::slurm::PowerLimitRequest> requested;
  bool print_energy = false;
  std::unique_ptr<zeus::device::ZeusdConnection> daemon;
  std::optional<zeus::slurm::StepState> step;
  std::unique_ptr<zeus::slurm::PolledEnergy> polled;  // GPUs without an energy counter
  // Writes the step's record so far into AdminComment every update_interval (the first after
  // 2 s at most, once the tasks run), so that a job cancelled before its end keeps a figure.
  std::thread updater;
  std::mutex updater_mutex;
  std::condition_variable updater_wake;
  bool updater_stop = false;

  // Stops the updater and waits for it (idempotent): before the step's end, and at exit.
  void stop_updater() {
    if (!updater.joinable()) {
      return;
    }
    {
      const std::lock_guard lock(updater_mutex);
      updater_stop = true;
    }
    updater_wake.notify_all();
    updater.join();
  }
  ~PluginState() { stop_updater(); }
  std::string user_note;  // printed by task 0 before it runs the user's program
  std::uint32_t exited_tasks = 0;
};

PluginState& plugin() {
  static PluginState state;
  return state;
}

int power_limit_option(int /*val*/, const char* optarg, int /*remote*/) {
  PluginState& p = plugin();
  const std::string value = optarg ? optarg : "";
  if (!p.site) {
    slurm_error(
        "zeus: --zeus-power-limit=%s cannot be used: the zeus plugin is misconfigured "
        "(%s); ask your administrator",
        value.c_str(), p.site_error.c_str());
    return -1;
  }
  try {
    p.requested = zeus::slurm::parse_power_limit_option(value, *p.site);
  } catch (const zeus::Error& error) {
    slurm_error("zeus: %s", error.what());
    return -1;
  }
  return 0;
}

int energy_option(int /*val*/, const char* /*optarg*/, int /*remote*/) {
  plugin().print_energy = true;
  return 0;
}

struct spank_option power_limit_spec = {
    const_cast<char*>("zeus-power-limit"),
    const_cast<char*>("W|off"),
    const_cast<char*>("Cap each allocated GPU's power at W watts for this job (zeus), or off"),
    1,
    0,
    power_limit_option};
struct spank_option energy_spec = {
    const_cast<char*>("zeus-energy"),
    nullptr,
    const_cast<char*>("Print each step's GPU energy (zeus) to the step's stderr"),
    0,
    0,
    energy_option};

std::string getenv_job(spank_t sp, const char* name) {
  char buffer[4096];
  if (spank_getenv(sp, name, buffer, sizeof buffer) != ESPANK_SUCCESS) {
    return {};
  }
  return buffer;
}

// This node's name as Slurm knows it: SLURMD_NODENAME where the step has it, else the short host
// name (NodeName differs from it only on nodes started with `slurmd -N`).
std::string node_name(spank_t sp) {
  std::string name = getenv_job(sp, "SLURMD_NODENAME");
  if (name.empty()) {
    if (const char* own = std::getenv("SLURMD_NODENAME")) {
      name = own;
    }
  }
  if (name.empty()) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    name = host;
    name = name.substr(0, name.find('.'));
  }
  return name;
}

std::unique_ptr<zeus::device::ZeusdConnection> connect(const SiteConfig& site) {
  zeus::device::ZeusdConfig config = site.zeusd;
  if (site.zeusd_token_file) {
    config.token = std::string(
        zeus::text::trim(zeus::text::read_file(*site.zeusd_token_file, "zeusd_token_file")));
  }
  return std::make_unique<zeus::device::ZeusdConnection>(config);
}

void start_updater(PluginState& p);

void begin(spank_t sp) {
  PluginState& p = plugin();
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  uid_t uid = 0;
  spank_get_item(sp, S_JOB_ID, &job_id);
  spank_get_item(sp, S_JOB_STEPID, &step_id);
  spank_get_item(sp, S_JOB_UID, &uid);
  const std::string step = zeus::slurm::step_name(step_id);
  // Slurm overwrites these for the steps that get GPUs; the batch step has the job's.
  const std::string listed = getenv_job(sp, step == "batch" ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
  if (listed.empty() || step == "extern") {
    return;
  }
  const auto cap = zeus::slurm::effective_cap_w(p.requested, *p.site);
  const std::string node = node_name(sp);
  std::string why;
  const auto gpus = zeus::slurm::parse_gpu_list(listed);
  const auto allowed = gpus ? zeus::slurm::allocated_gpus(job_id, node, why) : std::nullopt;
  if (!gpus) {
    why = "the step's GPU list '" + listed + "' cannot be read";
  } else if (allowed) {
    for (const int id : *gpus) {
      if (std::find(allowed->begin(), allowed->end(), id) == allowed->end()) {
        why = "GPU " + std::to_string(id) + " is not in the job's allocation on " + node;
      }
    }
  }
  if (!why.empty()) {
    p.user_note = "zeus: GPUs not measured or capped: " + why;
    slurm_info("zeus: job %u step %s: %s", job_id, step.c_str(), why.c_str());
    return;
  }
  zeus::slurm::StepState identity;
  identity.job_id = job_id;
  identity.step = step;
  identity.node = node;
  identity.uid = uid;
  identity.owner_pid = getpid();
  if (const auto stat = zeus::read_proc_stat(identity.owner_pid)) {
    identity.owner_start_time = stat->start_time;
  }
  identity.zeusd = p.site->zeusd.describe();
  try {
    p.daemon = connect(*p.site);
    p.step = zeus::slurm::begin_step(*p.site, *p.daemon, identity, *gpus, cap);
    if (const auto uncounted = zeus::slurm::uncounted_gpus(*p.step); !uncounted.empty()) {
      try {
        p.polled = std::make_unique<zeus::slurm::PolledEnergy>(p.daemon->config(), uncounted,
                                                               p.site->poll_interval_s);
      } catch (const std::exception& error) {
        slurm_info(
            "zeus: job %u step %s: cannot poll the power of its GPUs without an energy "
            "counter: %s",
            job_id, step.c_str(), error.what());
      }
    }
    start_updater(p);
    if (p.step->note && (cap || p.print_energy)) {
      p.user_note = "zeus: " + *p.step->note;
    }
  } catch (const std::exception& error) {
    p.step.reset();
    p.user_note =
        std::string("zeus: GPUs not ") + (cap ? "capped or " : "") + "measured: " + error.what();
    slurm_info("zeus: job %u step %s: %s", job_id, step.c_str(), error.what());
  }
}

// The record so far, as a partial one (on the updater's thread).
zeus::slurm::StepRecord partial_record(PluginState& p) {
  zeus::slurm::StepRecord record = zeus::slurm::measure_step(
      *p.daemon, *p.step, p.polled ? p.polled->so_far() : std::map<int, double>{});
  record.partial = true;
  return record;
}

void start_updater(PluginState& p) {
  if (!p.site->admin_comment || p.site->update_interval_s <= 0.0) {
    return;
  }
  p.updater = std::thread([&p] {
    const auto interval = std::chrono::duration<double>(p.site->update_interval_s);
    auto wait = std::min<std::chrono::duration<double>>(interval, std::chrono::seconds(2));
    std::unique_lock lock(p.updater_mutex);
    while (!p.updater_wake.wait_for(lock, wait, [&] { return p.updater_stop; })) {
      lock.unlock();
      try {
        zeus::slurm::record_admin_comment(*p.site, p.step->job_id, partial_record(p));
      } catch (const std::exception& error) {
        slurm_info("zeus: job %u step %s: no record so far: %s", p.step->job_id,
                   p.step->step.c_str(), error.what());
      }
      lock.lock();
      wait = interval;
    }
  });
}

void end_remote() {
  PluginState& p = plugin();
  if (!p.step || !p.daemon) {
    return;
  }
  p.stop_updater();
  const std::uint32_t job_id = p.step->job_id;
  try {
    const auto polled = p.polled ? p.polled->finish() : std::map<int, double>{};
    p.polled.reset();
    const zeus::slurm::StepRecord record =
        zeus::slurm::end_step(*p.site, *p.daemon, *p.step, polled);
    if (p.site->admin_comment && !zeus::slurm::record_admin_comment(*p.site, job_id, record)) {
      // Not lost: slurmd's log keeps it (and a partial record may be in AdminComment).
      slurm_info("zeus: job %u: %s", job_id, zeus::slurm::summary_text(job_id, record).c_str());
    }
    if (p.print_energy && record.step == "batch") {
      zeus::slurm::append_to_batch_stderr(job_id, zeus::slurm::summary_text(job_id, record));
    }
  } catch (const std::exception& error) {
    slurm_error("zeus: job %u step %s: %s (the epilog puts its caps back)", job_id,
                p.step->step.c_str(), error.what());
  }
  p.step.reset();
  p.daemon.reset();
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  PluginState& p = plugin();
  try {
    p.site = zeus::slurm::parse_site_args(std::vector<std::string>(av, av + ac));
  } catch (const zeus::Error& error) {
    p.site_error = error.what();
    slurm_error("zeus: %s; the plugin does nothing until plugstack.conf is fixed", error.what());
  }
  if (spank_option_register(sp, &power_limit_spec) != ESPANK_SUCCESS ||
      spank_option_register(sp, &energy_spec) != ESPANK_SUCCESS) {
    slurm_error("zeus: cannot register --zeus-power-limit and --zeus-energy");
  }
  return 0;
}

// In slurmstepd after the options, still as root (user_init runs with the user's privileges).
int slurm_spank_init_post_opt(spank_t sp, int /*ac*/, char** /*av*/) {
  if (plugin().site && spank_remote(sp)) {
    begin(sp);
  }
  return 0;
}

int slurm_spank_task_init(spank_t sp, int /*ac*/, char** /*av*/) {
  int task = -1;
  if (!plugin().user_note.empty() && spank_get_item(sp, S_TASK_ID, &task) == ESPANK_SUCCESS &&
      task == 0) {
    std::fprintf(stderr, "%s\n", plugin().user_note.c_str());
  }
  return 0;
}

// In slurmstepd as each task exits: after the last one, the step ends here, before slurmstepd
// tells srun (which, for a job srun allocated, then ends the job: too late for AdminComment).
int slurm_spank_task_exit(spank_t sp, int /*ac*/, char** /*av*/) {
  PluginState& p = plugin();
  if (!p.site || !spank_remote(sp) || !p.step) {
    return 0;
  }
  std::uint32_t tasks = 0;
  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &tasks) != ESPANK_SUCCESS ||
      ++p.exited_tasks >= tasks) {
    end_remote();
  }
  return 0;
}

int slurm_spank_exit(spank_t sp, int /*ac*/, char** /*av*/) {
  if (!plugin().site) {
    return 0;
  }
  if (spank_remote(sp)) {
    end_remote();
  } else if (spank_context() == S_CTX_LOCAL && plugin().print_energy) {
    zeus::slurm::print_summary_local();
  }
  return 0;
}

// Slurm calls it in a process of its own (`slurmstepd spank epilog`) without slurm_spank_init:
// the site's arguments come with the call.
int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  PluginState& p = plugin();
  if (!p.site) {
    try {
      p.site = zeus::slurm::parse_site_args(std::vector<std::string>(av, av + ac));
    } catch (const zeus::Error& error) {
      slurm_error("zeus: epilog: %s", error.what());
      return 0;
    }
  }
  std::uint32_t job_id = 0;
  spank_get_item(sp, S_JOB_ID, &job_id);
  try {
    auto daemon = connect(*p.site);
    for (const std::string& line : zeus::slurm::restore_leftovers(*p.site, *daemon, job_id)) {
      slurm_info("zeus: epilog: %s", line.c_str());
    }
  } catch (const std::exception& error) {
    slurm_error("zeus: epilog of job %u: cannot put caps back: %s", job_id, error.what());
  }
  return 0;
}

}  // extern "C"
