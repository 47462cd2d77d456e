// The multi-stream sample: C chunks of B bytes go host -> device, through a kernel (y = 2x + 1, fp32) and back,
// chunk i on stream i mod S; each stream is in order, so with S >= 2 one stream's copies overlap another's
// compute and the two link directions overlap each other. `npusim kernel pipeline_demo -p streams=S -p chunks=C
// -p bytes=B`.
#pragma once

#include <cstdint>
#include <vector>

#include "stack/runtime/runtime.hpp"

namespace npusim::stack::runtime {

struct PipelineDemo {
  std::uint32_t streams = 2, chunks = 8;
  std::uint64_t bytes = 1 << 20;  // per chunk, a multiple of 1 KiB
  std::vector<float> input, output;  // host buffers, chunks x bytes / 4 floats
};

// Throws InputError for parameters the demo cannot run (check before the simulation starts).
void validate(const PipelineDemo& demo);
// The host program. Fills `demo.input` (when empty) and leaves the results in `demo.output`.
void run_pipeline_demo(Device& dev, PipelineDemo& demo);

}  // namespace npusim::stack::runtime
