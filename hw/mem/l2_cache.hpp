// The shared L2: sliced by a line-address hash, set-associative, write-back and write-allocate. Pure bookkeeping
// (tags, dirty bits, when each line's data is there); the memory system adds the timing. Policies are small named
// implementations chosen in the YAML and registered in one place (make_replacement, make_slice_hash):
//   l2.replacement: lru | random       l2.slice_hash: xor | modulo
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config/chip_config.hpp"
#include "traces/stats.hpp"

namespace npusim::hw::mem {

class SliceHash {
 public:
  virtual ~SliceHash() = default;
  virtual std::uint32_t slice(std::uint64_t line_index) const = 0;
};
// modulo: line % slices. xor: the line index folded onto itself (bits above log2(slices) xor-ed in), so strides of
// a power of two spread over the slices instead of hammering one.
std::unique_ptr<SliceHash> make_slice_hash(const std::string& name, std::uint32_t slices);

class ReplacementPolicy {
 public:
  virtual ~ReplacementPolicy() = default;
  virtual void touch(std::uint64_t set, std::uint32_t way) = 0;
  virtual std::uint32_t victim(std::uint64_t set) = 0;  // among valid ways of a full set
};
std::unique_ptr<ReplacementPolicy> make_replacement(const std::string& name, std::uint64_t sets, std::uint32_t ways);

struct SliceStats {
  std::uint64_t hits = 0, misses = 0, evictions = 0, writebacks = 0, bytes = 0;
};

class L2Cache {
 public:
  explicit L2Cache(const config::L2Params& p);

  struct Way;
  struct Lookup {
    Way* way = nullptr;  // the line's entry, valid until the next access (for fill)
    bool hit = false;
    double ready = 0;  // hit: when the line's data is there (a fill may still be in flight)
    bool writeback = false;
    std::uint64_t victim_addr = 0;  // a dirty line evicted to make room
  };
  // Looks up the line holding `addr`; a miss allocates it (its data ready at `fill_ready`, set later with fill()).
  Lookup access(std::uint64_t addr, bool write, std::uint32_t bytes);
  void fill(std::uint64_t addr, double ready);
  static void fill(Way* way, double ready);

  std::uint32_t slice_of(std::uint64_t addr) const { return hash_->slice(addr / line_); }
  std::uint64_t line_bytes() const { return line_; }
  std::uint32_t slices() const { return slices_; }
  const std::vector<SliceStats>& stats() const { return stats_; }
  // Zeroes the counters in place (registered counters stay bound).
  void reset_stats() { std::fill(stats_.begin(), stats_.end(), SliceStats{}); }
  // Registers each slice's counters at `prefix`.slice<i> ("chip.l2.slice0.hits"): hits, misses, evictions,
  // writebacks, bytes.
  void register_stats(traces::StatsRegistry& reg, const std::string& prefix) const;

 public:
  struct Way {
    std::uint64_t tag = 0;
    double ready = 0;
    bool valid = false;
    bool dirty = false;
  };

 private:
  Way* find(std::uint64_t addr, std::uint64_t* set_out, std::uint32_t* slice_out);

  std::uint64_t line_;
  std::uint32_t slices_, ways_;
  std::uint64_t sets_;  // per slice
  std::unique_ptr<SliceHash> hash_;
  std::vector<std::unique_ptr<ReplacementPolicy>> repl_;  // per slice
  std::vector<Way> ways_store_;                           // [slice][set][way]
  std::vector<SliceStats> stats_;
};

}  // namespace npusim::hw::mem
