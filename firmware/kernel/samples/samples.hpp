// Built-in sample kernels, run with `npusim kernel NAME -p key=value`. Each sample parses its parameters, places
// its inputs in device memory (random, seeded, in functional mode), launches its kernel and, on request, compares
// the outputs with a CPU reference.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "firmware/kernel/launch_spec.hpp"

namespace npusim::fw::kernel::samples {

// Kernel parameters from -p key=value. Every getter validates and names the parameter in its error; unused() lists
// keys no getter asked for, so typos are errors rather than silently ignored.
class Params {
 public:
  explicit Params(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  std::uint64_t integer(const std::string& key, std::uint64_t def, std::uint64_t min, std::uint64_t max);
  std::string choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed);
  void reject_unused(const std::string& kernel) const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
};

struct CheckResult {
  double max_abs_err = 0;
  double max_rel_err = 0;
  bool passed = false;
};

// Reads device memory as the host sees it after the outputs were copied back.
using MemoryReader = std::function<void(std::uint64_t addr, void* out, std::uint64_t bytes)>;

// Input data the host copies to the device before the launch (`data` is empty in timing-only mode: only the copy's
// time matters then).
struct HostBuffer {
  std::uint64_t addr = 0;
  std::uint64_t bytes = 0;
  std::vector<std::uint8_t> data;
};

// A prepared run: the launch, its inputs and outputs in device memory (at addresses from a GmArena, so the first
// gm_bytes of device memory), plus what to check afterwards.
struct SampleRun {
  LaunchSpec spec;
  std::uint64_t gm_bytes = 0;
  std::vector<HostBuffer> inputs;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> outputs;  // (addr, bytes) copied back after the kernel
  std::function<CheckResult(const MemoryReader&)> check;         // valid in functional mode
  std::map<std::string, double> facts;  // e.g. expected peak, bytes moved (reported under "kernel")
};

// Adds an input buffer; `data` may be null (timing-only).
void add_input(SampleRun& run, std::uint64_t addr, const void* data, std::uint64_t bytes);

struct Sample {
  std::string name;
  std::string summary;
  std::string params;  // one line per parameter: "name (default): meaning"
  std::function<SampleRun(Params&, hw::chip::Chip&)> prepare;
};

const std::vector<Sample>& all_samples();
const Sample* find_sample(const std::string& name);

// Bump allocation of device memory for samples (512 B aligned, the GM full-bandwidth alignment).
class GmArena {
 public:
  std::uint64_t alloc(std::uint64_t bytes) {
    const std::uint64_t a = next_;
    next_ += (bytes + 511) / 512 * 512;
    return a;
  }
  std::uint64_t used() const { return next_; }

 private:
  std::uint64_t next_ = 0;
};

}  // namespace npusim::fw::kernel::samples
