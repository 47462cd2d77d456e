// HBM address mapping: a device address -> (pseudo-channel, bank group, bank, row, column). A mapping is named by its
// fields from most to least significant above the burst offset, e.g. "ro_ba_ch_co_bg": bank groups alternate every
// burst, then columns of a row, then pseudo-channels (every bank_groups x row_bytes bytes), banks, rows. Fields are
// mixed-radix digits (x % count, x / count), so counts need not be powers of two. Key: hbm.address_mapping.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/config/chip_config.hpp"

namespace npusim::hw::mem {

struct DramAddress {
  std::uint32_t pc = 0;    // pseudo-channel over the whole device (stack, channel, pseudo-channel)
  std::uint32_t bg = 0;    // bank group
  std::uint32_t bank = 0;  // bank within the group
  std::uint64_t row = 0;
  std::uint32_t col = 0;   // burst index within the row
};

class AddressMap {
 public:
  // Throws InputError for an unknown mapping name.
  explicit AddressMap(const config::HbmParams& h);
  DramAddress decode(std::uint64_t addr) const;
  std::uint32_t pseudo_channels() const { return pcs_; }
  std::uint32_t banks_per_pc() const { return bgs_ * banks_; }
  const std::string& name() const { return name_; }

 private:
  enum Field : std::uint8_t { kRow, kBank, kChannel, kColumn, kBankGroup };
  std::string name_;
  std::uint64_t burst_;
  std::uint32_t pcs_, bgs_, banks_, cols_;
  std::array<Field, 4> lsb_first_{};  // the four non-row fields, least significant first
};

}  // namespace npusim::hw::mem
