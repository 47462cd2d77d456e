#include "stack/graph/memory_plan.hpp"

#include <algorithm>

namespace npusim::stack::graph {

MemoryPlan plan_memory(const Program& p, const std::vector<std::uint64_t>& workspaces) {
  struct Buffer {
    std::uint64_t bytes = 0;
    long first = 0, last = -1;  // lifetime in steps, inclusive
    int tensor = -1, step = -1;  // a tensor's buffer, or a step's workspace
    std::uint64_t offset = 0;
  };
  const long steps = static_cast<long>(p.steps.size());
  auto base = [&](int t) { return p.tensors[static_cast<std::size_t>(t)].alias >= 0 ? p.tensors[static_cast<std::size_t>(t)].alias : t; };
  std::vector<Buffer> bufs;
  std::vector<int> buf_of(p.tensors.size(), -1);
  for (std::size_t t = 0; t < p.tensors.size(); ++t) {
    if (p.tensors[t].alias >= 0) continue;
    Buffer b;
    b.bytes = (p.tensors[t].desc.bytes() + MemoryPlan::kAlign - 1) / MemoryPlan::kAlign * MemoryPlan::kAlign;
    b.tensor = static_cast<int>(t);
    b.first = steps;  // until a writer says otherwise
    buf_of[t] = static_cast<int>(bufs.size());
    bufs.push_back(b);
  }
  auto touch = [&](int t, long s) {
    Buffer& b = bufs[static_cast<std::size_t>(buf_of[static_cast<std::size_t>(base(t))])];
    b.first = std::min(b.first, s);
    b.last = std::max(b.last, s);
  };
  for (std::size_t t = 0; t < p.tensors.size(); ++t)
    if (!p.tensors[t].constant.empty()) touch(static_cast<int>(t), -1);  // copied in before the first step
  for (int t : p.inputs) touch(t, -1);
  for (long s = 0; s < steps; ++s) {
    for (int t : p.steps[static_cast<std::size_t>(s)].inputs) touch(t, s);
    for (int t : p.steps[static_cast<std::size_t>(s)].outputs) touch(t, s);
  }
  for (int t : p.outputs) touch(t, steps);  // copied out after the last step
  for (long s = 0; s < steps; ++s) {
    const std::uint64_t w = s < static_cast<long>(workspaces.size()) ? workspaces[static_cast<std::size_t>(s)] : 0;
    if (!w) continue;
    Buffer b;
    b.bytes = (w + MemoryPlan::kAlign - 1) / MemoryPlan::kAlign * MemoryPlan::kAlign;
    b.first = b.last = s;
    b.step = static_cast<int>(s);
    bufs.push_back(b);
  }
  MemoryPlan plan;
  std::vector<std::size_t> order(bufs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bufs[a].bytes > bufs[b].bytes; });
  std::vector<std::size_t> placed;
  for (std::size_t i : order) {
    Buffer& b = bufs[i];
    plan.naive_bytes += b.bytes;
    if (b.last < b.first) b.last = b.first;  // never used: still gets a place
    // Lowest offset clear of every placed buffer alive at the same time.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;
    for (std::size_t j : placed) {
      const Buffer& o = bufs[j];
      if (o.first <= b.last && b.first <= o.last) busy.push_back({o.offset, o.offset + o.bytes});
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
  plan.offset.assign(p.tensors.size(), 0);
  plan.workspace_offset.assign(p.steps.size(), 0);
  for (const Buffer& b : bufs) {
    if (b.tensor >= 0) plan.offset[static_cast<std::size_t>(b.tensor)] = b.offset;
    else plan.workspace_offset[static_cast<std::size_t>(b.step)] = b.offset;
  }
  for (std::size_t t = 0; t < p.tensors.size(); ++t)
    if (p.tensors[t].alias >= 0) plan.offset[t] = plan.offset[static_cast<std::size_t>(p.tensors[t].alias)];
  return plan;
}

}  // namespace npusim::stack::graph
