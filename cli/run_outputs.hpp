// What every simulating command shares: -p key=value parsing and the --trace / --summary outputs of a run through
// the runtime (the trace's core tracks are attached while the chip is built, the rest is written at the end).
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stack/runtime/run_outputs.hpp"

namespace npusim::cli {

// "key=value" strings -> map; throws InputError naming a malformed one.
std::map<std::string, std::string> parse_params(const std::vector<std::string>& kvs);

using stack::runtime::RunOutputs;

}  // namespace npusim::cli
