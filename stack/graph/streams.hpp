// Stream assignment (a graph-engine pass over the lowered program): independent branches run on separate streams
// and meet through events, as a graph executor drives ACL streams. The steps' dependencies are their data (a step
// reads a buffer another writes, through views too); streams add their own order. The result also answers "does
// step a finish before step b starts?" for every pair, which the memory planner needs to let two buffers share
// memory only when one is dead before the other is written.
#pragma once

#include <cstdint>
#include <vector>

#include "stack/graph/lower.hpp"

namespace npusim::stack::graph {

struct StreamPlan {
  std::uint32_t streams = 1;         // streams used
  std::vector<std::uint32_t> stream;  // per step
  // Per step: events to wait for before it (the stream waits, not the host), and whether an event is recorded
  // after it (its id = the step's index in `event_of`, -1 for none).
  std::vector<std::vector<std::int32_t>> waits;
  std::vector<std::int32_t> event_of;
  std::uint32_t events = 0;
  // before(a, b): step a completes before step b starts (through data, stream order and events).
  bool before(std::size_t a, std::size_t b) const { return (reach_[b][a / 64] >> (a % 64)) & 1; }

  // reach_[b]: bit a set when a happens before b.
  std::vector<std::vector<std::uint64_t>> reach_;
};

// Assigns streams: a step continues the stream of the first producer it depends on when that producer is the last
// step of its stream, else it opens a new stream while fewer than `max_streams` are in use, else it takes the
// stream whose last step finished earliest in program order. A dependency on another stream becomes a wait on an
// event recorded after the producer, unless the stream already waited for that producer or a later step of its
// stream (vector clocks). max_streams = 1 gives the program order on one stream.
StreamPlan assign_streams(const Program& p, std::uint32_t max_streams);

}  // namespace npusim::stack::graph
