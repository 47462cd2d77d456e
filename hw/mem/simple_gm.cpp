#include <algorithm>
#include <cmath>

#include "hw/mem/gm_port.hpp"

namespace npusim::hw::mem {

void GmPort::register_stats(traces::StatsRegistry& reg, const std::string& prefix) const {
  reg.bind(prefix + ".gm.read_bytes", read_bytes_, "bytes", "bytes the cores read from global memory");
  reg.bind(prefix + ".gm.write_bytes", write_bytes_, "bytes", "bytes the cores wrote to global memory");
}

GmAccess SimpleGm::access(const GmRequest& r) {
  (r.write ? write_bytes_ : read_bytes_) += r.bytes;
  auto& free_at = (r.write ? write_free_ : read_free_).at(r.core);
  const std::uint64_t begin = std::max(r.start, free_at);
  const auto transfer = static_cast<std::uint64_t>(std::ceil(static_cast<double>(r.bytes) / p_.bytes_per_cycle));
  free_at = begin + transfer;
  return GmAccess{free_at, free_at + (r.write ? p_.write_latency : p_.read_latency)};
}

}  // namespace npusim::hw::mem
