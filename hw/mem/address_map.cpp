#include "hw/mem/address_map.hpp"

#include <vector>

#include "common/util/error.hpp"

namespace npusim::hw::mem {

AddressMap::AddressMap(const config::HbmParams& h)
    : name_(h.address_mapping),
      burst_(h.burst_bytes),
      pcs_(static_cast<std::uint32_t>(h.pseudo_channel_count())),
      bgs_(static_cast<std::uint32_t>(h.bank_groups)),
      banks_(static_cast<std::uint32_t>(h.banks_per_group)),
      cols_(static_cast<std::uint32_t>(h.row_bytes / h.burst_bytes)),
      row_hash_(h.row_hash) {
  const config::AddressFields parsed = config::parse_address_mapping(h);
  if (!parsed.error.empty()) throw InputError("hbm.address_mapping '" + name_ + "': " + parsed.error);
  col_low_ = parsed.low_columns;
  const std::vector<Field>& msb_first = parsed.msb_first;
  bool below = true;
  for (auto it = msb_first.rbegin(); it != msb_first.rend(); ++it) {
    if (*it == kChannel || *it == kBank || *it == kRow) below = false;
    if (below) {
      block_bursts_ *= *it == kBankGroup ? bgs_ : *it == kColumnLow ? col_low_ : *it == kColumn ? cols_ / col_low_ : 1;
      if (*it == kBankGroup) block_groups_ = it == msb_first.rbegin() ? BlockGroups::kRoundRobin : BlockGroups::kOther;
    }
    switch (*it) {
      case kBank: lsb_first_.push_back({kBank, banks_}); break;
      case kChannel: lsb_first_.push_back({kChannel, pcs_}); break;
      case kColumn: lsb_first_.push_back({kColumn, cols_ / col_low_}); break;
      case kColumnLow: lsb_first_.push_back({kColumnLow, col_low_}); break;
      case kBankGroup: lsb_first_.push_back({kBankGroup, bgs_}); break;
      case kRow: break;
    }
  }
}

DramAddress AddressMap::decode(std::uint64_t addr) const {
  DramAddress d;
  std::uint64_t x = addr / burst_;
  std::uint32_t col_high = 0, col_low = 0;
  for (const Digit& g : lsb_first_) {
    const auto digit = static_cast<std::uint32_t>(x % g.count);
    x /= g.count;
    switch (g.field) {
      case kBank: d.bank = digit; break;
      case kChannel: d.pc = digit; break;
      case kColumn: col_high = digit; break;
      case kColumnLow: col_low = digit; break;
      case kBankGroup: d.bg = digit; break;
      case kRow: break;
    }
  }
  d.col = col_high * col_low_ + col_low;
  d.row = x;
  if (row_hash_) {
    const std::uint64_t h = (d.row * 2654435761ULL) & 0xffffffffULL;
    d.bank = static_cast<std::uint32_t>((d.bank + (h >> 8)) % banks_);
    d.pc = static_cast<std::uint32_t>((d.pc + (h >> 16)) % pcs_);
  }
  return d;
}

}  // namespace npusim::hw::mem
