// The interface between a core's MTE/FixPipe engines and global memory. The simple model below implements it
// until the memory system (interconnect, L2, HBM) does.
//
// Requests arrive in simulated-time order: the core synchronises SystemC time to `start` before it calls.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config/chip_config.hpp"
#include "traces/stats.hpp"

namespace npusim::hw::mem {

struct GmRequest {
  std::uint32_t core = 0;
  bool write = false;
  std::uint64_t addr = 0;
  std::uint64_t bytes = 0;
  std::uint64_t start = 0;  // core cycle at which the engine starts sending
};

// When the port has accepted the last byte (the engine is free to go on) and when the data has arrived (a read's
// consumer, or a flag after a write, may proceed). Both in core cycles.
struct GmAccess {
  std::uint64_t accepted = 0;
  std::uint64_t done = 0;
};

class GmPort {
 public:
  virtual ~GmPort() = default;
  virtual GmAccess access(const GmRequest& r) = 0;
  // Registers the model's counters under `prefix` ("chip"): the simple model its gm.read_bytes and gm.write_bytes.
  virtual void register_stats(traces::StatsRegistry& reg, const std::string& prefix) const;
  std::uint64_t read_bytes() const { return read_bytes_; }
  std::uint64_t write_bytes() const { return write_bytes_; }

 protected:
  std::uint64_t read_bytes_ = 0, write_bytes_ = 0;
};

// Per-core port with a fixed rate and latency: the transfer starts when the port is free, takes
// ceil(bytes / simple_gm.bytes_per_cycle) cycles, and its data is done simple_gm.{read,write}_latency cycles after
// the last byte. Reads and writes have separate ports, as the core's read and write channels are separate.
class SimpleGm final : public GmPort {
 public:
  SimpleGm(const config::SimpleGmParams& p, std::uint32_t cores) : p_(p), read_free_(cores, 0), write_free_(cores, 0) {}
  GmAccess access(const GmRequest& r) override;

 private:
  config::SimpleGmParams p_;
  std::vector<std::uint64_t> read_free_, write_free_;
};

}  // namespace npusim::hw::mem
