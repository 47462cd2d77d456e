#include "hw/mem/address_map.hpp"

#include <sstream>
#include <vector>

#include "common/util/error.hpp"

namespace npusim::hw::mem {

AddressMap::AddressMap(const config::HbmParams& h)
    : name_(h.address_mapping),
      burst_(h.burst_bytes),
      pcs_(static_cast<std::uint32_t>(h.pseudo_channel_count())),
      bgs_(static_cast<std::uint32_t>(h.bank_groups)),
      banks_(static_cast<std::uint32_t>(h.banks_per_group)),
      cols_(static_cast<std::uint32_t>(h.row_bytes / h.burst_bytes)) {
  std::vector<Field> msb_first;
  std::stringstream ss(name_);
  for (std::string f; std::getline(ss, f, '_');) {
    if (f == "ro") msb_first.push_back(kRow);
    else if (f == "ba") msb_first.push_back(kBank);
    else if (f == "ch") msb_first.push_back(kChannel);
    else if (f == "co") msb_first.push_back(kColumn);
    else if (f == "bg") msb_first.push_back(kBankGroup);
    else throw InputError("hbm.address_mapping '" + name_ + "': unknown field '" + f + "'");
  }
  if (msb_first.size() != 5 || msb_first.front() != kRow) {
    throw InputError("hbm.address_mapping '" + name_ + "': needs the five fields ro, ba, ch, co, bg with ro first");
  }
  for (int i = 0; i < 4; ++i) lsb_first_[i] = msb_first[4 - i];
}

DramAddress AddressMap::decode(std::uint64_t addr) const {
  DramAddress d;
  std::uint64_t x = addr / burst_;
  for (Field f : lsb_first_) {
    switch (f) {
      case kBank: d.bank = static_cast<std::uint32_t>(x % banks_); x /= banks_; break;
      case kChannel: d.pc = static_cast<std::uint32_t>(x % pcs_); x /= pcs_; break;
      case kColumn: d.col = static_cast<std::uint32_t>(x % cols_); x /= cols_; break;
      case kBankGroup: d.bg = static_cast<std::uint32_t>(x % bgs_); x /= bgs_; break;
      case kRow: break;
    }
  }
  d.row = x;
  return d;
}

}  // namespace npusim::hw::mem
