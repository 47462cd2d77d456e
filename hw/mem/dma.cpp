#include "hw/mem/dma.hpp"

#include <algorithm>

namespace npusim::hw::mem {

Transfer SdmaEngines::copy(std::uint64_t bytes, double t_ns) {
  const auto it = std::min_element(free_.begin(), free_.end());
  Transfer tr;
  tr.engine = static_cast<std::uint32_t>(it - free_.begin());
  tr.start_ns = std::max(t_ns, *it);
  tr.done_ns = tr.start_ns + p_.latency + static_cast<double>(bytes) / p_.bandwidth * 1e9;
  *it = tr.done_ns;
  bytes_ += bytes;
  return tr;
}

Transfer HostLink::transfer(bool to_device, std::uint64_t bytes, double t_ns) {
  double& lane = to_device ? h2d_free_ : d2h_free_;
  (to_device ? h2d_bytes_ : d2h_bytes_) += bytes;
  Transfer tr;
  tr.start_ns = std::max(t_ns, lane);
  const double stream = static_cast<double>(bytes) / p_.bandwidth * 1e9;
  lane = tr.start_ns + stream;
  tr.done_ns = tr.start_ns + p_.latency + stream;
  return tr;
}

}  // namespace npusim::hw::mem
