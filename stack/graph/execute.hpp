// Running a lowered program through the runtime: the stream plan puts independent steps on separate streams with
// events between them; the memory plan lays out one constant region and one activation arena (views share their
// base's buffer, buffers that are never alive together share memory); each step is planned by its library op before
// anything is simulated. The constants and inputs are copied in on stream 0, which the other streams wait for; the
// steps are launched in program order on their streams; stream 0 waits for the others and copies the outputs back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stack/graph/lower.hpp"
#include "stack/graph/memory_plan.hpp"
#include "stack/graph/streams.hpp"
#include "stack/runtime/runtime.hpp"

namespace npusim::stack::graph {

struct Execution {
  std::vector<std::vector<std::uint8_t>> outputs;  // functional mode: the graph outputs' bytes
  std::uint64_t device_bytes = 0;                  // the peak of device memory: constants + activation arena
  std::uint64_t constant_bytes = 0;                // the constant region (weights)
  std::uint64_t arena_bytes = 0;                   // the activation arena
  std::uint64_t naive_bytes = 0;                   // what every buffer on its own would take
  std::uint32_t streams = 0;                       // streams the run created
  std::uint32_t first_execute_task = 0;            // tasks before it load the model (constants), the rest execute it
  nlohmann::json steps = nlohmann::json::array();  // per step: node, op, block_dim, tiling
};

class Executor {
 public:
  // Plans every step for the chip and assigns at most `max_streams` streams; throws InputError naming the node when
  // an op refuses its call.
  Executor(const Program& p, const config::ChipConfig& chip, std::uint32_t max_streams = 1);
  const StreamPlan& streams() const { return streams_; }
  const MemoryPlan& memory() const { return memory_; }
  // Runs on the device. In functional mode (the device's), `inputs` holds the graph inputs' bytes and the outputs
  // come back; in timing-only mode only sizes move.
  Execution run(runtime::Device& dev, const std::vector<std::vector<std::uint8_t>>& inputs) const;
  // Throws InputError when the device is functional and `inputs` do not match the program's inputs in count and size.
  void check_inputs(const runtime::Device& dev, const std::vector<std::vector<std::uint8_t>>& inputs) const;
  // The same run from inside a host program (Device::run or Device::call): submits everything and synchronises.
  // The run uses the first streams of `pool`, which it extends when it holds fewer than the plan needs (a device
  // that runs on keeps one pool: streams are a limited resource). With `release` the run's device memory is freed
  // afterwards.
  Execution enqueue(runtime::Device& d, const std::vector<std::vector<std::uint8_t>>& inputs,
                    std::vector<runtime::Stream>& pool, bool release) const;
  const Program& program() const { return p_; }

 private:
  const Program& p_;
  std::vector<ops::OpPlan> plans_;
  StreamPlan streams_;
  MemoryPlan memory_;
};

}  // namespace npusim::stack::graph
