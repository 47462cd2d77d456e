#include "hw/mem/l2_cache.hpp"

#include "common/util/arith.hpp"
#include "common/util/error.hpp"

namespace npusim::hw::mem {

namespace {

class ModuloHash final : public SliceHash {
 public:
  explicit ModuloHash(std::uint32_t n) : n_(n) {}
  std::uint32_t slice(std::uint64_t line) const override { return static_cast<std::uint32_t>(line % n_); }

 private:
  std::uint32_t n_;
};

class XorHash final : public SliceHash {
 public:
  explicit XorHash(std::uint32_t n) : n_(n) {
    while ((1u << bits_) < n_) ++bits_;
  }
  std::uint32_t slice(std::uint64_t line) const override {
    std::uint64_t h = 0;
    for (std::uint64_t x = line; x; x >>= bits_) h ^= x & ((1ULL << bits_) - 1);
    return static_cast<std::uint32_t>((h + (line >> bits_)) % n_);
  }

 private:
  std::uint32_t n_;
  std::uint32_t bits_ = 1;
};

// Exact LRU with per-way timestamps (ways are few).
class LruPolicy final : public ReplacementPolicy {
 public:
  LruPolicy(std::uint64_t sets, std::uint32_t ways) : ways_(ways), stamp_(sets * ways, 0) {}
  void touch(std::uint64_t set, std::uint32_t way) override { stamp_[set * ways_ + way] = ++clock_; }
  std::uint32_t victim(std::uint64_t set) override {
    std::uint32_t best = 0;
    for (std::uint32_t w = 1; w < ways_; ++w)
      if (stamp_[set * ways_ + w] < stamp_[set * ways_ + best]) best = w;
    return best;
  }

 private:
  std::uint32_t ways_;
  std::vector<std::uint64_t> stamp_;
  std::uint64_t clock_ = 0;
};

// Deterministic pseudo-random victims (xorshift), so runs repeat exactly.
class RandomPolicy final : public ReplacementPolicy {
 public:
  explicit RandomPolicy(std::uint32_t ways) : ways_(ways) {}
  void touch(std::uint64_t, std::uint32_t) override {}
  std::uint32_t victim(std::uint64_t) override {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return static_cast<std::uint32_t>(state_ % ways_);
  }

 private:
  std::uint32_t ways_;
  std::uint64_t state_ = 0x9e3779b97f4a7c15ULL;
};

}  // namespace

std::unique_ptr<SliceHash> make_slice_hash(const std::string& name, std::uint32_t slices) {
  if (name == "modulo") return std::make_unique<ModuloHash>(slices);
  if (name == "xor") return std::make_unique<XorHash>(slices);
  throw InputError("l2.slice_hash: unknown policy '" + name + "' (xor, modulo)");
}

std::unique_ptr<ReplacementPolicy> make_replacement(const std::string& name, std::uint64_t sets, std::uint32_t ways) {
  if (name == "lru") return std::make_unique<LruPolicy>(sets, ways);
  if (name == "random") return std::make_unique<RandomPolicy>(ways);
  throw InputError("l2.replacement: unknown policy '" + name + "' (lru, random)");
}

void L2Cache::register_stats(traces::StatsRegistry& reg, const std::string& prefix) const {
  for (std::size_t i = 0; i < stats_.size(); ++i) {
    const std::string at = prefix + ".slice" + std::to_string(i);
    const SliceStats& s = stats_[i];
    reg.bind(at + ".hits", s.hits, "count", "line lookups that found the line");
    reg.bind(at + ".misses", s.misses, "count", "line lookups that allocated the line (filled from HBM)");
    reg.bind(at + ".evictions", s.evictions, "count", "valid lines replaced");
    reg.bind(at + ".writebacks", s.writebacks, "count", "dirty lines written back to HBM");
    reg.bind(at + ".bytes", s.bytes, "bytes", "bytes the slice served to requesters");
  }
}

L2Cache::L2Cache(const config::L2Params& p)
    : line_(p.line_bytes),
      slices_(narrow<std::uint32_t>(p.slices)),
      ways_(narrow<std::uint32_t>(p.ways)),
      sets_(p.capacity / p.line_bytes / p.slices / p.ways),
      hash_(make_slice_hash(p.slice_hash, slices_)),
      stats_(slices_) {
  for (std::uint32_t s = 0; s < slices_; ++s) repl_.push_back(make_replacement(p.replacement, sets_, ways_));
  ways_store_.resize(static_cast<std::size_t>(slices_) * sets_ * ways_);
}

L2Cache::Way* L2Cache::find(std::uint64_t addr, std::uint64_t* set_out, std::uint32_t* slice_out) {
  const std::uint64_t line = addr / line_;
  const std::uint32_t slice = hash_->slice(line);
  const std::uint64_t set = (line / slices_) % sets_;
  *set_out = set;
  *slice_out = slice;
  Way* base = &ways_store_[(static_cast<std::size_t>(slice) * sets_ + set) * ways_];
  for (std::uint32_t w = 0; w < ways_; ++w)
    if (base[w].valid && base[w].tag == line) return &base[w];
  return nullptr;
}

L2Cache::Lookup L2Cache::access(std::uint64_t addr, bool write, std::uint32_t bytes) {
  std::uint64_t set;
  std::uint32_t slice;
  Lookup r;
  Way* w = find(addr, &set, &slice);
  SliceStats& s = stats_[slice];
  s.bytes += bytes;
  Way* base = &ways_store_[(static_cast<std::size_t>(slice) * sets_ + set) * ways_];
  if (w) {
    ++s.hits;
    r.hit = true;
    r.way = w;
    r.ready = w->ready;
    w->dirty |= write;
    repl_[slice]->touch(set, static_cast<std::uint32_t>(w - base));
    return r;
  }
  ++s.misses;
  std::uint32_t way = ways_;
  for (std::uint32_t i = 0; i < ways_; ++i)
    if (!base[i].valid) {
      way = i;
      break;
    }
  if (way == ways_) {
    way = repl_[slice]->victim(set);
    ++s.evictions;
    if (base[way].dirty) {
      ++s.writebacks;
      r.writeback = true;
      r.victim_addr = base[way].tag * line_;
    }
  }
  base[way] = Way{addr / line_, 0, true, write};
  repl_[slice]->touch(set, way);
  r.way = &base[way];
  return r;
}

void L2Cache::fill(Way* way, double ready) { way->ready = ready; }

void L2Cache::fill(std::uint64_t addr, double ready) {
  std::uint64_t set;
  std::uint32_t slice;
  if (Way* w = find(addr, &set, &slice)) w->ready = ready;
}

}  // namespace npusim::hw::mem
