// What the Slurm plugin reads from the site, the user and slurmctld (zeus::slurm), on hostile
// input. The first byte picks what the rest is:
//   0: plugstack.conf arguments, one per line  -> parse_site_args
//   1: a --zeus-power-limit value              -> parse_power_limit_option (default site)
//   2: a GPU list / a gres_detail_str entry    -> parse_gpu_list, gpus_in_gres_detail
//   3: an AdminComment                         -> merge_admin_comment, find_step_record
// Invariants: only zeus::Error escapes the parsers; a parsed list is sorted, unique, in range; a
// merged comment is a JSON object holding the step's record, which reads back.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/text.hpp"
#include "fuzz_check.hpp"
#include "slurm/gres.hpp"
#include "slurm/site_config.hpp"
#include "slurm/step_record.hpp"
#include "zeus/common/error.hpp"

namespace {

void check_list(const std::optional<std::vector<int>>& ids) {
  if (ids) {
    ZEUS_FUZZ_CHECK(std::is_sorted(ids->begin(), ids->end()));
    ZEUS_FUZZ_CHECK(std::adjacent_find(ids->begin(), ids->end()) == ids->end());
    for (const int id : *ids) {
      ZEUS_FUZZ_CHECK(id >= 0 && id <= 4095);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 64 * 1024) {
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      try {
        const auto site = zeus::slurm::parse_site_args(zeus::text::split_to_strings(text, '\n'));
        ZEUS_FUZZ_CHECK(site.min_power_limit_w <= site.max_power_limit_w);
        if (site.default_power_limit_w) {
          ZEUS_FUZZ_CHECK(*site.default_power_limit_w >= site.min_power_limit_w &&
                          *site.default_power_limit_w <= site.max_power_limit_w);
        }
      } catch (const zeus::Error& error) {
        ZEUS_FUZZ_CHECK(std::string_view(error.what()).find('\n') == std::string_view::npos);
      }
      break;
    case 1:
      try {
        const zeus::slurm::SiteConfig site;
        const auto request = zeus::slurm::parse_power_limit_option(text, site);
        ZEUS_FUZZ_CHECK(request.off || (request.watts >= site.min_power_limit_w &&
                                        request.watts <= site.max_power_limit_w));
      } catch (const zeus::Error& error) {
        ZEUS_FUZZ_CHECK(std::string_view(error.what()).find('\n') == std::string_view::npos);
      }
      break;
    case 2:
      check_list(zeus::slurm::parse_gpu_list(text));
      check_list(zeus::slurm::gpus_in_gres_detail(text));
      break;
    default: {
      zeus::slurm::StepRecord record;
      record.step = "0";
      record.node = "n1";
      record.duration_s = 1.5;
      record.gpus[0].energy_j = 100.0;
      const auto merged = zeus::slurm::merge_admin_comment(std::string(text), record, 4);
      if (merged) {
        const auto parsed = nlohmann::json::parse(*merged);
        ZEUS_FUZZ_CHECK(parsed.is_object());
        const auto back = zeus::slurm::find_step_record(*merged, "0", "n1");
        ZEUS_FUZZ_CHECK(!parsed["zeus"]["steps"].contains("0") || back.has_value());
      }
      (void)zeus::slurm::find_step_record(std::string(text), "0", "n1");
      break;
    }
  }
  return 0;
}
