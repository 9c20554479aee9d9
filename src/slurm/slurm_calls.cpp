// The Slurm plugin's calls into Slurm's API (slurm_calls.hpp).
#include "slurm/slurm_calls.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "slurm/gres.hpp"
#include "slurm/step_session.hpp"

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

namespace zeus::slurm {

namespace {

// Whether slurmctld allocated the job GPUs on any node (so that srun --zeus-energy does not wait
// for a record that never comes).
bool job_has_gpus(const job_info_t& job) {
  for (std::uint32_t i = 0; i < job.gres_detail_cnt; ++i) {
    const auto gpus = gpus_in_gres_detail(job.gres_detail_str[i]);
    if (!gpus || !gpus->empty()) {
      return true;
    }
  }
  // A job that has ended has no GRES detail left; its TRES still say.
  return job.tres_alloc_str != nullptr && std::strstr(job.tres_alloc_str, "gres/gpu") != nullptr;
}

}  // namespace

// The job's GPU indices on `node`, from slurmctld (trusted, unlike the job's environment).
std::optional<std::vector<int>> allocated_gpus(std::uint32_t job_id, const std::string& node,
                                               std::string& why) {
  job_info_msg_t* message = nullptr;
  if (slurm_load_job(&message, job_id, SHOW_DETAIL) != SLURM_SUCCESS || !message ||
      message->record_count < 1) {
    why = std::string("cannot read the job's allocation from slurmctld: ") +
          slurm_strerror(slurm_get_errno());
    if (message) {
      slurm_free_job_info_msg(message);
    }
    return std::nullopt;
  }
  const job_info_t& job = message->job_array[0];
  std::optional<std::vector<int>> ids;
  hostlist_t hosts = slurm_hostlist_create(job.nodes);
  int index = hosts ? slurm_hostlist_find(hosts, node.c_str()) : -1;
  if (index < 0 && hosts && slurm_hostlist_count(hosts) == 1) {
    index = 0;  // a one-node job: whatever this node's name is, it is that node
  }
  if (hosts) {
    slurm_hostlist_destroy(hosts);
  }
  if (index < 0) {
    why = "node " + node + " is not in the job's node list";
  } else if (static_cast<std::uint32_t>(index) >= job.gres_detail_cnt) {
    ids = std::vector<int>{};
  } else {
    ids = gpus_in_gres_detail(job.gres_detail_str[index]);
    if (!ids) {
      why = std::string("cannot read the job's GRES detail '") + job.gres_detail_str[index] + "'";
    }
  }
  slurm_free_job_info_msg(message);
  return ids;
}

bool record_admin_comment(const SiteConfig& site, std::uint32_t job_id, const StepRecord& record) {
  JobLock lock(site.state_dir, job_id);
  job_info_msg_t* message = nullptr;
  if (slurm_load_job(&message, job_id, SHOW_ALL) != SLURM_SUCCESS || !message ||
      message->record_count < 1) {
    slurm_error("zeus: job %u: cannot read its AdminComment: %s", job_id,
                slurm_strerror(slurm_get_errno()));
    return false;
  }
  const char* existing = message->job_array[0].admin_comment;
  const auto merged =
      merge_admin_comment(existing ? existing : "", record, site.max_recorded_steps);
  slurm_free_job_info_msg(message);
  if (!merged) {
    slurm_info(
        "zeus: job %u: AdminComment holds text that is not a JSON object; left alone, "
        "step %s not recorded there",
        job_id, record.step.c_str());
    return false;
  }
  job_desc_msg_t update;
  slurm_init_job_desc_msg(&update);
  update.job_id = job_id;
  std::string text = *merged;
  update.admin_comment = text.data();
  if (slurm_update_job(&update) != SLURM_SUCCESS) {
    slurm_info("zeus: job %u: cannot update AdminComment: %s", job_id,
               slurm_strerror(slurm_get_errno()));
    return false;
  }
  return true;
}

// The batch step's summary, appended to the job's stderr file as the job's user.
void append_to_batch_stderr(std::uint32_t job_id, const std::string& text) {
  job_info_msg_t* message = nullptr;
  if (slurm_load_job(&message, job_id, SHOW_ALL) != SLURM_SUCCESS || !message ||
      message->record_count < 1) {
    return;
  }
  job_info_t& job = message->job_array[0];
  char path[4096] = "";
  slurm_get_job_stderr(path, sizeof path, &job);
  const uid_t uid = job.user_id;
  const gid_t gid = job.group_id;
  slurm_free_job_info_msg(message);
  if (path[0] != '/') {
    return;
  }
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
      _exit(1);
    }
    const int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || write(fd, text.data(), text.size()) < 0) {
      _exit(1);
    }
    _exit(0);
  }
  if (child > 0) {
    waitpid(child, nullptr, 0);
  }
}

// srun: the step's summary from AdminComment, once the step's slurmstepds have written it.
void print_summary_local() {
  const char* job_text = std::getenv("SLURM_JOB_ID");
  const char* step_text = std::getenv("SLURM_STEP_ID");
  if (!job_text || !step_text) {
    return;
  }
  const auto job_id = static_cast<std::uint32_t>(std::strtoul(job_text, nullptr, 10));
  const std::string step = step_text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    job_info_msg_t* message = nullptr;
    if (slurm_load_job(&message, job_id, SHOW_ALL | SHOW_DETAIL) == SLURM_SUCCESS && message &&
        message->record_count >= 1) {
      const job_info_t& job = message->job_array[0];
      const bool has_gpus = job_has_gpus(job);
      const std::string comment = job.admin_comment ? job.admin_comment : "";
      std::string printed;
      hostlist_t hosts = slurm_hostlist_create(job.nodes);
      char* host = nullptr;
      bool all = true;
      while (hosts && (host = slurm_hostlist_shift(hosts)) != nullptr) {
        if (const auto record = find_step_record(comment, step, host)) {
          printed += summary_text(job_id, *record);
        } else {
          all = false;
        }
        free(host);
      }
      if (hosts) {
        slurm_hostlist_destroy(hosts);
      }
      slurm_free_job_info_msg(message);
      if (all && !printed.empty()) {
        std::fputs(printed.c_str(), stderr);
        return;
      }
      if (!has_gpus) {
        std::fprintf(stderr, "zeus: step %s.%s has no GPUs: no GPU energy to show\n", job_text,
                     step_text);
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr,
               "zeus: no energy recorded for step %s.%s (no GPUs, or zeusd not "
               "reachable on its node)\n",
               job_text, step_text);
}

}  // namespace zeus::slurm
