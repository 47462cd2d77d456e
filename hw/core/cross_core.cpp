#include "hw/core/cross_core.hpp"

#include <string>

#include "common/util/error.hpp"

namespace npusim::hw::core {

CrossCoreHub::CrossCoreHub(std::vector<Member> members, std::uint32_t ids, std::uint32_t max_pending,
                           std::uint64_t latency, std::function<void(std::uint32_t)> notify)
    : members_(std::move(members)),
      ids_(ids),
      max_pending_(max_pending),
      latency_(latency),
      notify_(std::move(notify)) {
  tokens_.assign(members_.size(), std::vector<std::deque<std::uint64_t>>(ids_));
}

void CrossCoreHub::deliver(std::uint32_t core, std::uint32_t id, std::uint64_t cycle) {
  auto& q = tokens_[core][id];
  if (q.size() >= max_pending_) {
    throw InputError("cross-core flag id " + std::to_string(id) + " of core " + std::to_string(core) +
                     " already holds " + std::to_string(max_pending_) + " pending sets (the hardware limit)");
  }
  q.push_back(cycle + latency_);
  if (notify_) notify_(core);
}

void CrossCoreHub::gather(std::uint32_t mode, const std::vector<std::uint32_t>& participants, std::uint32_t setter,
                          std::uint32_t id, std::uint64_t cycle, const std::vector<std::uint32_t>& targets) {
  const std::uint32_t scope = mode == 0 ? static_cast<std::uint32_t>(members_[setter].kind) : members_[setter].group;
  auto& counts = pending_[{mode, scope, id}];
  if (++counts[setter] > max_pending_) {
    throw InputError("cross-core flag id " + std::to_string(id) + ": core " + std::to_string(setter) + " set it " +
                     std::to_string(max_pending_ + 1) + " times before its partners did");
  }
  for (std::uint32_t p : participants)
    if (counts[p] == 0) return;
  for (std::uint32_t p : participants) --counts[p];
  for (std::uint32_t t : targets) deliver(t, id, cycle);
}

void CrossCoreHub::set(std::uint32_t core, std::uint32_t mode, std::uint32_t id, std::uint64_t cycle) {
  if (id >= ids_) {
    throw InputError("cross-core flag id " + std::to_string(id) + " is out of range (0.." + std::to_string(ids_ - 1) +
                     ", flags.cross_core_ids)");
  }
  const Member& me = members_.at(core);
  if (me.kind == CoreKind::kCoupled) throw InputError("cross-core flags exist only on split chips");
  std::vector<std::uint32_t> same_kind, group_aiv;
  std::uint32_t group_aic = UINT32_MAX;
  for (std::uint32_t c = 0; c < members_.size(); ++c) {
    if (members_[c].kind == me.kind) same_kind.push_back(c);
    if (members_[c].group == me.group && members_[c].kind == CoreKind::kVector) group_aiv.push_back(c);
    if (members_[c].group == me.group && members_[c].kind == CoreKind::kCube) group_aic = c;
  }
  switch (mode) {
    case 0: gather(0, same_kind, core, id, cycle, same_kind); return;
    case 1:
      if (me.kind != CoreKind::kVector) throw InputError("cross-core mode 1 synchronises the AIV of a group; an AIC cannot use it");
      gather(1, group_aiv, core, id, cycle, group_aiv);
      return;
    case 2:
      if (me.kind == CoreKind::kCube) {
        for (std::uint32_t t : group_aiv) deliver(t, id, cycle);
      } else {
        if (group_aic == UINT32_MAX) throw InputError("cross-core mode 2: this AIV's group has no AIC in the launch");
        gather(2, group_aiv, core, id, cycle, {group_aic});
      }
      return;
    default: throw InputError("cross-core mode " + std::to_string(mode) + " does not exist (0, 1 or 2)");
  }
}

std::optional<std::uint64_t> CrossCoreHub::peek(std::uint32_t core, std::uint32_t id) const {
  const auto& q = tokens_.at(core).at(id);
  if (q.empty()) return std::nullopt;
  return q.front();
}

void CrossCoreHub::consume(std::uint32_t core, std::uint32_t id) { tokens_.at(core).at(id).pop_front(); }

}  // namespace npusim::hw::core
