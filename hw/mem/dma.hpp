// SDMA engines (device-to-device copies) and the host link (host <-> device transfers), for the runtime's memcpy
// tasks. Reservation models in ns, plain C++:
//   SDMA: a copy takes the engine that is free first; start = max(t, engine free),
//         done = start + sdma.latency + bytes / sdma.bandwidth; the engine is busy until done.
//   host link: one lane per direction; start = max(t, lane free), the lane is busy bytes / host_link.bandwidth,
//         done = start + host_link.latency + bytes / bandwidth (the latency is pipelined: back-to-back transfers
//         stream at the link rate).
#pragma once

#include <cstdint>
#include <vector>

#include "common/config/chip_config.hpp"
#include "traces/stats.hpp"

namespace npusim::hw::mem {

struct Transfer {
  double start_ns = 0;
  double done_ns = 0;
  std::uint32_t engine = 0;
};

class SdmaEngines {
 public:
  explicit SdmaEngines(const config::SdmaParams& p) : p_(p), free_(p.engines, 0.0) {}
  Transfer copy(std::uint64_t bytes, double t_ns);
  std::uint64_t bytes() const { return bytes_; }
  void register_stats(traces::StatsRegistry& reg, const std::string& prefix) const {
    reg.bind(prefix + ".bytes", bytes_, "bytes", "bytes the SDMA engines copied (device to device)");
  }

 private:
  config::SdmaParams p_;
  std::vector<double> free_;
  std::uint64_t bytes_ = 0;
};

class HostLink {
 public:
  explicit HostLink(const config::HostLinkParams& p) : p_(p) {}
  Transfer transfer(bool to_device, std::uint64_t bytes, double t_ns);
  std::uint64_t bytes(bool to_device) const { return to_device ? h2d_bytes_ : d2h_bytes_; }
  void register_stats(traces::StatsRegistry& reg, const std::string& prefix) const {
    reg.bind(prefix + ".h2d_bytes", h2d_bytes_, "bytes", "bytes copied from the host to the device");
    reg.bind(prefix + ".d2h_bytes", d2h_bytes_, "bytes", "bytes copied from the device to the host");
  }

 private:
  config::HostLinkParams p_;
  double h2d_free_ = 0, d2h_free_ = 0;
  std::uint64_t h2d_bytes_ = 0, d2h_bytes_ = 0;
};

}  // namespace npusim::hw::mem
