// `npusim info`: the device as `npu-smi info` shows it, derived from a chip config.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/config/loader.hpp"

namespace npusim::cli {

// Device facts with the contract keys of `npusim info --json` (name, cores, clock_GHz, peak_fp16_tflops,
// peak_int8_tops, peak_hbm_GBps, l2_bytes, hbm_bytes) and more.
nlohmann::json device_facts(const config::LoadedConfig& loaded);
// The same facts as a boxed text table.
std::string format_device_facts(const nlohmann::json& facts);

}  // namespace npusim::cli
