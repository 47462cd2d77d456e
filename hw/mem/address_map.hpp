// HBM address mapping: a device address -> (pseudo-channel, bank group, bank, row, column). A mapping is named by its
// fields from most to least significant above the burst offset: ro(w), ba(nk), ch(annel, i.e. pseudo-channel), bg
// (bank group), co(lumn). The column may be split: "coN" is a field of N columns and "co" holds the rest. Fields are
// mixed-radix digits (x % count, x / count), so counts need not be powers of two. Key: hbm.address_mapping.
// Example, the default "ro_ba_co_ch_co8_bg": bank groups alternate every burst, 8 columns of each then fill
// 1 KiB of one pseudo-channel, then the next pseudo-channel; the other columns, banks and rows above that.
// With hbm.row_hash, bank and pseudo-channel are then rotated by a hash of the row (h = row x 2654435761 mod 2^32):
// bank = (bank + h / 2^8) mod banks, pc = (pc + h / 2^16) mod pcs. For a fixed row this is a bijection, so the
// addresses of one row keep their locality while rows a power of two apart land on different banks and channels.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

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
  // Bursts in each aligned block that share pseudo-channel, bank and row (the fields below the lowest of ch and
  // ba): a contiguous range is served block by block, decoding once per block.
  std::uint64_t block_bursts() const { return block_bursts_; }
  // How the bank group varies inside a block: not at all (the block is one bank group), every burst (bg is the
  // lowest field: any bank_groups consecutive bursts cover them all), or otherwise (decode each burst).
  enum class BlockGroups : std::uint8_t { kOne, kRoundRobin, kOther };
  BlockGroups block_groups() const { return block_groups_; }
  std::uint32_t pseudo_channels() const { return pcs_; }
  std::uint32_t banks_per_pc() const { return bgs_ * banks_; }
  const std::string& name() const { return name_; }

 private:
  using Field = config::AddressFields::Field;
  static constexpr Field kRow = config::AddressFields::kRow, kBank = config::AddressFields::kBank,
                         kChannel = config::AddressFields::kChannel, kColumn = config::AddressFields::kColumn,
                         kColumnLow = config::AddressFields::kColumnLow, kBankGroup = config::AddressFields::kBankGroup;
  struct Digit {
    Field field;
    std::uint32_t count;
  };
  std::string name_;
  std::uint64_t burst_;
  std::uint32_t pcs_, bgs_, banks_, cols_;
  std::uint32_t col_low_ = 1;       // columns in the "coN" field (1 when the column is not split)
  bool row_hash_ = false;
  std::uint64_t block_bursts_ = 1;
  BlockGroups block_groups_ = BlockGroups::kOne;
  std::vector<Digit> lsb_first_;    // the non-row fields, least significant first
};

}  // namespace npusim::hw::mem
