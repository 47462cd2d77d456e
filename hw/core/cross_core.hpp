// Cross-core flags of split chips (Ascend C CrossCoreSetFlag / CrossCoreWaitFlag). Each (core, flag id) has a
// counter; a wait blocks while it is zero and decrements it otherwise. Which counters a set increments depends on
// its mode:
//   mode 0: once every participating core of the setter's kind has set the id, each of them gets +1;
//   mode 1: once both AIV of a group have set the id, each of them gets +1;
//   mode 2: an AIC's set gives each AIV of its group +1; once every AIV of a group has set, their AIC gets +1.
// A counter holds at most flags.cross_core_max_pending sets. Plain C++: the SystemC shell supplies `notify`.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

namespace npusim::hw::core {

enum class CoreKind : std::uint8_t { kCube, kVector, kCoupled };

class CrossCoreHub {
 public:
  struct Member {
    CoreKind kind;
    std::uint32_t group;  // index of the 1 AIC : n AIV group
  };
  // A count arrives `latency` cycles after its set fires (flags.cross_core_latency).
  CrossCoreHub(std::vector<Member> members, std::uint32_t ids, std::uint32_t max_pending, std::uint64_t latency,
               std::function<void(std::uint32_t core)> notify);

  // A set from `core` at `cycle`. Throws InputError for an invalid mode for this core, an id out of range or a
  // counter over its limit (the message names the core and id; the caller adds the instruction).
  void set(std::uint32_t core, std::uint32_t mode, std::uint32_t id, std::uint64_t cycle);
  // The cycle at which the oldest available count of (core, id) arrived, if any.
  std::optional<std::uint64_t> peek(std::uint32_t core, std::uint32_t id) const;
  void consume(std::uint32_t core, std::uint32_t id);

 private:
  void deliver(std::uint32_t core, std::uint32_t id, std::uint64_t cycle);
  void gather(std::uint32_t mode, const std::vector<std::uint32_t>& participants, std::uint32_t setter,
              std::uint32_t id, std::uint64_t cycle, const std::vector<std::uint32_t>& targets);

  std::vector<Member> members_;
  std::uint32_t ids_, max_pending_;
  std::uint64_t latency_;
  std::function<void(std::uint32_t)> notify_;
  std::vector<std::vector<std::deque<std::uint64_t>>> tokens_;  // [core][id] arrival cycles
  // Pending sets of a gather, per participant: key (mode, scope, id).
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::map<std::uint32_t, std::uint32_t>> pending_;
};

}  // namespace npusim::hw::core
