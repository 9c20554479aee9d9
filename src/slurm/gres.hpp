// Which GPUs Slurm gave a job or a step, from the text Slurm writes them in (pure parsing).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace zeus::slurm {

// "0,1,4-6" (SLURM_STEP_GPUS, SLURM_JOB_GPUS, an IDX list) -> {0, 1, 4, 5, 6}, sorted, without
// duplicates; nullopt for anything malformed (empty items, negative or huge numbers, a reversed
// range).
std::optional<std::vector<int>> parse_gpu_list(std::string_view text);

// The GPU indices of one node's entry of a job's gres_detail_str ("gpu:3(IDX:0-2)",
// "gpu:a100:2(IDX:0,2),mps:0(...)"): every IDX list of a gpu entry, merged. An entry without GPUs
// gives {}; nullopt when a gpu entry's IDX cannot be read.
std::optional<std::vector<int>> gpus_in_gres_detail(std::string_view detail);

}  // namespace zeus::slurm
