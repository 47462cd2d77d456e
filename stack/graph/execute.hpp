// Running a lowered program through the runtime: one device allocation laid out by the memory plan (views share
// their base's buffer, buffers with disjoint lifetimes share memory), the constants and inputs copied in, each step planned by its library op (before anything is simulated)
// and launched on one stream in order, the outputs copied back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stack/graph/lower.hpp"
#include "stack/graph/memory_plan.hpp"
#include "stack/runtime/runtime.hpp"

namespace npusim::stack::graph {

struct Execution {
  std::vector<std::vector<std::uint8_t>> outputs;  // functional mode: the graph outputs' bytes
  std::uint64_t device_bytes = 0;                  // the memory plan's arena: the peak of device memory
  std::uint64_t naive_bytes = 0;                   // what every buffer on its own would take
  std::uint32_t streams = 0;                       // streams the run created
  nlohmann::json steps = nlohmann::json::array();  // per step: node, op, block_dim, tiling
};

class Executor {
 public:
  // Plans every step for the chip; throws InputError naming the node when an op refuses its call.
  Executor(const Program& p, const config::ChipConfig& chip);
  // Runs on the device. In functional mode (the device's), `inputs` holds the graph inputs' bytes and the outputs
  // come back; in timing-only mode only sizes move.
  Execution run(runtime::Device& dev, const std::vector<std::vector<std::uint8_t>>& inputs) const;

 private:
  const Program& p_;
  std::vector<ops::OpPlan> plans_;
  MemoryPlan memory_;
};

}  // namespace npusim::stack::graph
