// CSV writer for the op summary (one row per device task, in the spirit of msprof's op_summary). The columns are
// declared with unit and definition, so docs/ can list them from the same declaration.
#pragma once

#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "common/util/atomic_file.hpp"

namespace npusim::traces {

struct CsvColumn {
  std::string name;
  std::string unit;        // "" for none
  std::string definition;  // one line
};

class CsvWriter {
 public:
  // Writes to a temporary beside `path` that close() renames to `path` (none appears without it); throws InputError
  // naming the path when it cannot write.
  CsvWriter(const std::string& path, std::vector<CsvColumn> columns);
  CsvWriter(std::ostream& out, std::vector<CsvColumn> columns);

  // Writes one row; throws std::logic_error when the cell count differs from the column count.
  void row(const std::vector<std::string>& cells);
  void flush();
  void close();  // a file writer: its file appears now, complete
  const std::vector<CsvColumn>& columns() const { return columns_; }

  // RFC 4180 quoting: cells with comma, quote or newline are quoted, quotes doubled.
  static std::string quote(const std::string& cell);

 private:
  void header();
  std::unique_ptr<AtomicFile> file_;
  std::ostream* out_;
  std::string path_;
  std::vector<CsvColumn> columns_;
};

// Formats a number for a CSV cell: integers without decimals, others with up to 6 significant decimals.
std::string csv_number(double v);

}  // namespace npusim::traces
