#include "firmware/kernel/samples/samples.hpp"

#include <algorithm>

#include "common/util/error.hpp"

namespace npusim::fw::kernel::samples {

Sample vector_add_sample();
Sample vector_peak_sample();
Sample cube_peak_sample();
Sample matmul_tile_sample();
Sample hbm_stream_sample();
Sample l2_stream_sample();
Sample latency_probe_sample();

std::uint64_t Params::integer(const std::string& key, std::uint64_t def, std::uint64_t min, std::uint64_t max) {
  used_.insert(key);
  const auto it = values_.find(key);
  if (it == values_.end()) return def;
  const std::string& s = it->second;
  std::uint64_t v = 0;
  try {
    std::size_t pos = 0;
    if (s.empty() || s[0] == '-') throw std::invalid_argument(s);
    v = std::stoull(s, &pos, 0);
    if (pos != s.size()) throw std::invalid_argument(s);
  } catch (const std::exception&) {
    throw InputError("parameter '" + key + "': '" + s + "' is not a non-negative integer");
  }
  if (v < min || v > max) {
    throw InputError("parameter '" + key + "': " + s + " is out of range [" + std::to_string(min) + ", " +
                     std::to_string(max) + "]");
  }
  return v;
}

std::string Params::choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed) {
  used_.insert(key);
  const auto it = values_.find(key);
  if (it == values_.end()) return def;
  if (std::find(allowed.begin(), allowed.end(), it->second) == allowed.end()) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    throw InputError("parameter '" + key + "': '" + it->second + "' is not one of " + list);
  }
  return it->second;
}

void Params::reject_unused(const std::string& kernel) const {
  for (const auto& [k, v] : values_) {
    if (!used_.count(k)) {
      std::string known;
      for (const auto& u : used_) known += (known.empty() ? "" : ", ") + u;
      throw InputError("kernel " + kernel + " has no parameter '" + k + "' (it takes: " + known + ")");
    }
  }
}

void add_input(SampleRun& run, std::uint64_t addr, const void* data, std::uint64_t bytes) {
  HostBuffer b;
  b.addr = addr;
  b.bytes = bytes;
  if (data) b.data.assign(static_cast<const std::uint8_t*>(data), static_cast<const std::uint8_t*>(data) + bytes);
  run.inputs.push_back(std::move(b));
}

const std::vector<Sample>& all_samples() {
  static const std::vector<Sample> samples{vector_add_sample(),  vector_peak_sample(), cube_peak_sample(),
                                           matmul_tile_sample(), hbm_stream_sample(),  l2_stream_sample(),
                                           latency_probe_sample()};
  return samples;
}

const Sample* find_sample(const std::string& name) {
  for (const Sample& s : all_samples())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace npusim::fw::kernel::samples
