#include "stack/graph/memory_plan.hpp"

#include <algorithm>

namespace npusim::stack::graph {

namespace {

std::uint64_t aligned(std::uint64_t b) { return (b + MemoryPlan::kAlign - 1) / MemoryPlan::kAlign * MemoryPlan::kAlign; }

}  // namespace

MemoryPlan plan_memory(const Program& p, const std::vector<std::uint64_t>& workspaces, const StreamPlan& streams) {
  constexpr long kStart = -1;  // the copies in, before every step
  const long end = static_cast<long>(p.steps.size());  // the copies out, after every step
  struct Buffer {
    std::uint64_t bytes = 0;
    long writer = kStart;
    std::vector<long> uses;  // steps that write or read it (kStart, end included)
    int tensor = -1, step = -1;  // a tensor's buffer, or a step's workspace
    std::uint64_t offset = 0;
  };
  auto base = [&](int t) { return p.tensors[static_cast<std::size_t>(t)].alias >= 0 ? p.tensors[static_cast<std::size_t>(t)].alias : t; };
  MemoryPlan plan;
  plan.offset.assign(p.tensors.size(), 0);
  plan.constant.assign(p.tensors.size(), false);
  plan.workspace_offset.assign(p.steps.size(), 0);
  std::vector<Buffer> bufs;
  std::vector<int> buf_of(p.tensors.size(), -1);
  for (std::size_t t = 0; t < p.tensors.size(); ++t) {
    if (p.tensors[t].alias >= 0) continue;
    if (!p.tensors[t].constant.empty()) {  // the constant region: no reuse
      plan.constant[t] = true;
      plan.offset[t] = plan.constant_bytes;
      plan.constant_bytes += aligned(p.tensors[t].desc.bytes());
      continue;
    }
    Buffer b;
    b.bytes = aligned(p.tensors[t].desc.bytes());
    b.tensor = static_cast<int>(t);
    buf_of[t] = static_cast<int>(bufs.size());
    bufs.push_back(b);
  }
  auto use = [&](int t, long s, bool write) {
    const int bi = buf_of[static_cast<std::size_t>(base(t))];
    if (bi < 0) return;  // a constant
    Buffer& b = bufs[static_cast<std::size_t>(bi)];
    b.uses.push_back(s);
    if (write) b.writer = s;
  };
  for (int t : p.inputs) use(t, kStart, true);
  for (long s = 0; s < end; ++s) {
    for (int t : p.steps[static_cast<std::size_t>(s)].inputs) use(t, s, false);
    for (int t : p.steps[static_cast<std::size_t>(s)].outputs) use(t, s, true);
  }
  for (int t : p.outputs) use(t, end, false);
  for (long s = 0; s < end; ++s) {
    const std::uint64_t w = s < static_cast<long>(workspaces.size()) ? workspaces[static_cast<std::size_t>(s)] : 0;
    if (!w) continue;
    Buffer b;
    b.bytes = aligned(w);
    b.writer = s;
    b.uses = {s};
    b.step = static_cast<int>(s);
    bufs.push_back(b);
  }
  // a happens before b (kStart before everything, everything before end).
  auto before = [&](long a, long b) {
    if (a == b) return false;
    if (a == kStart || b == end) return true;
    if (b == kStart || a == end) return false;
    return streams.before(static_cast<std::size_t>(a), static_cast<std::size_t>(b));
  };
  // x is dead before y is written: every use of x happens before y's writer.
  auto dead_before = [&](const Buffer& x, const Buffer& y) {
    return std::all_of(x.uses.begin(), x.uses.end(), [&](long u) { return before(u, y.writer); });
  };
  std::vector<std::size_t> order(bufs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bufs[a].bytes > bufs[b].bytes; });
  std::vector<std::size_t> placed;
  plan.naive_bytes = plan.constant_bytes;
  for (std::size_t i : order) {
    Buffer& b = bufs[i];
    plan.naive_bytes += b.bytes;
    if (b.uses.empty()) b.uses = {b.writer};  // never used: still gets a place
    // Lowest offset clear of every placed buffer that may be alive at the same time.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;
    for (std::size_t j : placed) {
      const Buffer& o = bufs[j];
      if (!dead_before(o, b) && !dead_before(b, o)) busy.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    std::uint64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (at + b.bytes <= lo) break;
      at = std::max(at, hi);
    }
    b.offset = at;
    plan.arena_bytes = std::max(plan.arena_bytes, at + b.bytes);
    placed.push_back(i);
  }
  for (const Buffer& b : bufs) {
    if (b.tensor >= 0) plan.offset[static_cast<std::size_t>(b.tensor)] = b.offset;
    else plan.workspace_offset[static_cast<std::size_t>(b.step)] = b.offset;
  }
  for (std::size_t t = 0; t < p.tensors.size(); ++t) {
    if (p.tensors[t].alias < 0) continue;
    const auto a = static_cast<std::size_t>(p.tensors[t].alias);
    plan.offset[t] = plan.offset[a];
    plan.constant[t] = plan.constant[a];
  }
  return plan;
}

}  // namespace npusim::stack::graph
