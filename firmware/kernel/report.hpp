// The --json report of a launch (DESIGN.md, "What comes out"; definitions in docs/metrics.md).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "firmware/kernel/launch.hpp"

namespace npusim::fw::kernel {

// cycles, time_us, tasks (one: the launch), overlap, memory, sim.
nlohmann::json launch_report(const LaunchResult& r, const hw::chip::Chip& chip, const std::string& op);

}  // namespace npusim::fw::kernel
