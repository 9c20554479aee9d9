// The AMD SMI functions of the fake libamd_smi.so (fake_amdsmi.hpp describes the script).
#include "fake_amdsmi.hpp"

using namespace fake_amdsmi;

extern "C" {

// ---- AMD SMI ----

Status amdsmi_init(std::uint64_t /*flags*/) {
  State& s = state();
  const Entered entered(s);
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.init_calls;
  if (const auto early = enter(s, "amdsmi_init", false); early) {
    return *early;
  }
  load_env_script(s);
  ++s.init_count;
  return kSuccess;
}

Status amdsmi_shut_down() {
  FAKE_ENTER(amdsmi_shut_down)
  --s.init_count;
  ++s.shutdown_calls;
  return kSuccess;
}

Status amdsmi_get_lib_version(void* version) {
  State& s = state();
  const Entered entered(s);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (const auto early = enter(s, "amdsmi_get_lib_version", false); early) {
    return *early;
  }
  if (version == nullptr) {
    return kInval;
  }
  const auto word = [&s](std::size_t i) { return i < s.version.size() ? s.version[i] : 0U; };
  if (new_layout(s)) {
    VersionNew v{word(0), word(1), word(2), kBuild};
    std::memcpy(version, &v, sizeof(v));
  } else {
    VersionOld v{word(0), word(1), word(2), word(3), kBuild};
    std::memcpy(version, &v, sizeof(v));
  }
  return kSuccess;
}

Status amdsmi_get_socket_handles(std::uint32_t* count, void** sockets) {
  FAKE_ENTER(amdsmi_get_socket_handles)
  if (count == nullptr) {
    return kInval;
  }
  const auto total = static_cast<std::uint32_t>(s.sockets.size());
  if (sockets == nullptr) {
    *count = total;
    return kSuccess;
  }
  const std::uint32_t written = std::min(*count, total);
  for (std::uint32_t i = 0; i < written; ++i) {
    sockets[i] = socket_handle_for(i);
  }
  *count = written;
  return written < total ? kInsufficientSize : kSuccess;
}

Status amdsmi_get_processor_handles(void* socket, std::uint32_t* count, void** processors) {
  FAKE_ENTER(amdsmi_get_processor_handles)
  const auto socket_index = reinterpret_cast<std::uintptr_t>(socket) - 0x9000;
  if (count == nullptr || socket_index >= s.sockets.size()) {
    return kInval;
  }
  std::vector<void*> handles;
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    if (s.devices[i].socket == s.sockets[socket_index]) {
      handles.push_back(handle_for(i));
    }
  }
  const auto total = static_cast<std::uint32_t>(handles.size());
  if (processors == nullptr) {
    *count = total;
    return kSuccess;
  }
  const std::uint32_t written = std::min(*count, total);
  for (std::uint32_t i = 0; i < written; ++i) {
    processors[i] = handles[i];
  }
  *count = written;
  return written < total ? kInsufficientSize : kSuccess;
}

Status amdsmi_get_gpu_asic_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_gpu_asic_info)
  FAKE_DEVICE(handle)
  std::memset(info, 0, new_layout(s) ? kAsicInfoSizeNew : kAsicInfoSizeOld);
  std::strncpy(static_cast<char*>(info), d->name.c_str(), 255);
  return kSuccess;
}

Status amdsmi_get_gpu_device_uuid(void* handle, unsigned int* length, char* uuid) {
  FAKE_ENTER(amdsmi_get_gpu_device_uuid)
  FAKE_DEVICE(handle)
  if (length == nullptr || uuid == nullptr) {
    return kInval;
  }
  if (*length < d->uuid.size() + 1) {
    *length = static_cast<unsigned int>(d->uuid.size() + 1);
    return kInsufficientSize;
  }
  std::memcpy(uuid, d->uuid.c_str(), d->uuid.size() + 1);
  *length = static_cast<unsigned int>(d->uuid.size() + 1);
  return kSuccess;
}

Status amdsmi_get_gpu_device_bdf(void* handle, void* bdf) {
  FAKE_ENTER(amdsmi_get_gpu_device_bdf)
  FAKE_DEVICE(handle)
  if (bdf == nullptr) {
    return kInval;
  }
  std::memcpy(bdf, &d->bdf, sizeof(d->bdf));
  return kSuccess;
}

Status amdsmi_get_power_cap_info(void* handle, std::uint32_t sensor, void* info) {
  FAKE_ENTER(amdsmi_get_power_cap_info)
  FAKE_DEVICE(handle)
  if (sensor != 0 || info == nullptr) {
    return kInval;
  }
  PowerCapInfo caps{};
  caps.power_cap = d->power_cap_uw;
  caps.default_power_cap = d->default_power_cap_uw;
  caps.dpm_cap = 2100;
  caps.min_power_cap = d->min_power_cap_uw;
  caps.max_power_cap = d->max_power_cap_uw;
  std::memcpy(info, &caps, sizeof(caps));
  return kSuccess;
}

Status amdsmi_set_power_cap(void* handle, std::uint32_t sensor, std::uint64_t cap_uw) {
  FAKE_ENTER(amdsmi_set_power_cap)
  FAKE_DEVICE(handle)
  ++d->set_power_cap_calls;
  if (sensor != 0 || cap_uw < d->min_power_cap_uw || cap_uw > d->max_power_cap_uw) {
    return kInval;
  }
  d->power_cap_uw = cap_uw;
  return kSuccess;
}

#ifndef FAKE_AMDSMI_BROKEN
Status amdsmi_get_power_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_power_info)
  FAKE_DEVICE(handle)
  if (new_layout(s)) {
    PowerInfoNew p{};
    p.current_socket_power = d->current_socket_power_w.value_or(0xFFFFFFFFu);
    p.average_socket_power = d->average_socket_power_w.value_or(0xFFFFFFFFu);
    p.socket_power = d->current_socket_power_w.value_or(d->average_socket_power_w.value_or(0));
    p.power_limit = static_cast<std::uint32_t>(d->power_cap_uw / 1'000'000);
    std::memcpy(info, &p, sizeof(p));
  } else {
    PowerInfoOld p{};
    p.current_socket_power = d->current_socket_power_w.value_or(0xFFFFu);
    p.average_socket_power = d->average_socket_power_w.value_or(0xFFFFu);
    p.power_limit = static_cast<std::uint32_t>(d->power_cap_uw / 1'000'000);
    std::memcpy(info, &p, sizeof(p));
  }
  return kSuccess;
}
#endif

Status amdsmi_get_temp_metric(void* handle, std::uint32_t sensor_type, std::uint32_t metric,
                              std::int64_t* temperature) {
  FAKE_ENTER(amdsmi_get_temp_metric)
  FAKE_DEVICE(handle)
  if (temperature == nullptr) {
    return kInval;
  }
  if (sensor_type != kTemperatureHotspot || metric != kTemperatureCurrent) {
    return kNotSupported;
  }
  *temperature = d->temperature_c;
  return kSuccess;
}

Status amdsmi_get_gpu_kfd_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_gpu_kfd_info)
  FAKE_DEVICE(handle)
  KfdInfo kfd{};
  kfd.kfd_id = 40000 + d->node_id;
  kfd.node_id = d->node_id;
  std::memcpy(info, &kfd, sizeof(kfd));
  return kSuccess;
}

#if !defined(FAKE_AMDSMI_MINIMAL) && !defined(FAKE_AMDSMI_BROKEN)
Status amdsmi_get_gpu_enumeration_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_gpu_enumeration_info)
  FAKE_DEVICE(handle)
  EnumerationInfo e{};
  e.drm_render = 128 + d->hip_id;
  e.drm_card = d->hip_id;
  e.hsa_id = d->node_id;
  e.hip_id = d->hip_id;
  std::snprintf(e.hip_uuid, sizeof(e.hip_uuid), "GPU-%s", d->uuid.c_str());
  std::memcpy(info, &e, sizeof(e));
  return kSuccess;
}

Status amdsmi_get_energy_count(void* handle, std::uint64_t* accumulator, float* resolution_uj,
                               std::uint64_t* timestamp) {
  FAKE_ENTER(amdsmi_get_energy_count)
  FAKE_DEVICE(handle)
  if (accumulator == nullptr || resolution_uj == nullptr || timestamp == nullptr) {
    return kInval;
  }
  *accumulator = static_cast<std::uint64_t>(std::floor(d->energy_counts));
  *resolution_uj = d->energy_resolution_uj;
  *timestamp = 0;
  return kSuccess;
}

Status amdsmi_get_clk_freq(void* handle, std::uint32_t clock_type, void* frequencies) {
  FAKE_ENTER(amdsmi_get_clk_freq)
  FAKE_DEVICE(handle)
  const std::vector<std::uint64_t>* list = nullptr;
  if (clock_type == kClockGfx) {
    list = &d->gfx_clocks_mhz;
  } else if (clock_type == kClockMem) {
    list = &d->mem_clocks_mhz;
  } else {
    return kNotSupported;
  }
  Frequencies f{};
  f.num_supported =
      static_cast<std::uint32_t>(std::min<std::size_t>(list->size(), kMaxFrequencies));
  for (std::uint32_t i = 0; i < f.num_supported; ++i) {
    f.frequency[i] = (*list)[i] * 1'000'000;
  }
  std::memcpy(frequencies, &f, sizeof(f));
  return kSuccess;
}

Status amdsmi_set_gpu_clk_range(void* handle, std::uint64_t min_mhz, std::uint64_t max_mhz,
                                std::uint32_t clock_type) {
  FAKE_ENTER(amdsmi_set_gpu_clk_range)
  FAKE_DEVICE(handle)
  if (min_mhz > max_mhz) {
    return kInval;
  }
  if (clock_type == kClockGfx) {
    d->gfx_range_mhz = std::make_pair(min_mhz, max_mhz);
  } else if (clock_type == kClockMem) {
    d->mem_range_mhz = std::make_pair(min_mhz, max_mhz);
  } else {
    return kInval;
  }
  d->perf_level = 3;  // AMDSMI_DEV_PERF_LEVEL_MANUAL
  return kSuccess;
}

Status amdsmi_set_gpu_perf_level(void* handle, std::uint32_t level) {
  FAKE_ENTER(amdsmi_set_gpu_perf_level)
  FAKE_DEVICE(handle)
  ++d->perf_level_calls;
  d->perf_level = level;
  if (level == 0) {
    d->gfx_range_mhz.reset();
    d->mem_range_mhz.reset();
  }
  return kSuccess;
}

Status amdsmi_get_gpu_driver_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_gpu_driver_info)
  FAKE_DEVICE(handle)
  std::memset(info, 0, new_layout(s) ? kDriverInfoSizeNew : kDriverInfoSizeOld);
  std::strncpy(static_cast<char*>(info), d->driver_version.c_str(), 63);
  return kSuccess;
}
#endif

}  // extern "C"
