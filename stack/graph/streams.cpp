#include "stack/graph/streams.hpp"

#include <algorithm>

namespace npusim::stack::graph {

StreamPlan assign_streams(const Program& p, std::uint32_t max_streams) {
  const std::size_t n = p.steps.size();
  max_streams = std::max<std::uint32_t>(1, max_streams);
  auto base = [&](int t) { return p.tensors[static_cast<std::size_t>(t)].alias >= 0 ? p.tensors[static_cast<std::size_t>(t)].alias : t; };
  // Data dependencies: the writer of every buffer a step reads.
  std::vector<int> writer(p.tensors.size(), -1);
  std::vector<std::vector<std::size_t>> deps(n);
  for (std::size_t s = 0; s < n; ++s) {
    for (int in : p.steps[s].inputs) {
      const int w = writer[static_cast<std::size_t>(base(in))];
      if (w >= 0 && std::find(deps[s].begin(), deps[s].end(), static_cast<std::size_t>(w)) == deps[s].end())
        deps[s].push_back(static_cast<std::size_t>(w));
    }
    for (int out : p.steps[s].outputs) writer[static_cast<std::size_t>(base(out))] = static_cast<int>(s);
  }
  StreamPlan plan;
  plan.stream.assign(n, 0);
  plan.waits.assign(n, {});
  plan.event_of.assign(n, -1);
  std::vector<long> last(max_streams, -1);  // the last step of each stream
  // clock[s][t]: the position on stream t (count of its steps) that step s has synchronised with, directly or not.
  std::vector<std::vector<std::uint32_t>> clock(n, std::vector<std::uint32_t>(max_streams, 0));
  std::vector<std::uint32_t> count(max_streams, 0);   // steps issued per stream
  std::vector<std::uint32_t> position(n, 0);          // a step's position on its stream (1-based)
  std::uint32_t used = 0;
  for (std::size_t s = 0; s < n; ++s) {
    long stream = -1;
    for (std::size_t d : deps[s])  // continue a producer's stream when it ends there
      if (last[plan.stream[d]] == static_cast<long>(d)) {
        stream = plan.stream[d];
        break;
      }
    if (stream < 0) {
      if (used < max_streams) {
        stream = used++;
      } else {  // the stream whose last step is earliest
        stream = 0;
        for (std::uint32_t t = 1; t < max_streams; ++t)
          if (last[t] < last[static_cast<std::size_t>(stream)]) stream = t;
      }
    }
    const auto st = static_cast<std::uint32_t>(stream);
    plan.stream[s] = st;
    // The clock inherited from the stream's previous step, then the waits.
    if (last[st] >= 0) clock[s] = clock[static_cast<std::size_t>(last[st])];
    for (std::size_t d : deps[s]) {
      const std::uint32_t t = plan.stream[d];
      if (t == st || clock[s][t] >= position[d]) continue;  // ordered already
      if (plan.event_of[d] < 0) plan.event_of[d] = static_cast<std::int32_t>(plan.events++);
      plan.waits[s].push_back(plan.event_of[d]);
      for (std::uint32_t k = 0; k < max_streams; ++k) clock[s][k] = std::max(clock[s][k], clock[d][k]);
    }
    position[s] = ++count[st];
    clock[s][st] = position[s];
    last[st] = static_cast<long>(s);
  }
  plan.streams = std::max<std::uint32_t>(used, 1);
  // Happens-before: a precedes b when b's clock covers a's position on a's stream.
  plan.reach_.assign(n, std::vector<std::uint64_t>((n + 63) / 64, 0));
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t a = 0; a < b; ++a)
      if (clock[b][plan.stream[a]] >= position[a] && a != b) plan.reach_[b][a / 64] |= 1ULL << (a % 64);
  return plan;
}

}  // namespace npusim::stack::graph
