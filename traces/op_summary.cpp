#include "traces/op_summary.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace npusim::traces {

CsvWriter::CsvWriter(const std::string& path, std::vector<CsvColumn> columns)
    : file_(std::make_unique<AtomicFile>(path)), out_(&file_->stream()), path_(path), columns_(std::move(columns)) {
  header();
}

CsvWriter::CsvWriter(std::ostream& out, std::vector<CsvColumn> columns) : out_(&out), columns_(std::move(columns)) {
  header();
}

std::string CsvWriter::quote(const std::string& cell) {
  if (cell.find_first_of(",\"\n\r") == std::string::npos) return cell;
  std::string q = "\"";
  for (char c : cell) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

void CsvWriter::header() {
  std::vector<std::string> names;
  // The unit in parentheses, unless the name already ends with it (start_us, not start_us(us)).
  for (const auto& c : columns_) {
    const std::string suffix = "_" + c.unit;
    const bool named =
        c.name.size() > suffix.size() && c.name.compare(c.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    names.push_back(c.unit.empty() || named ? c.name : c.name + "(" + c.unit + ")");
  }
  row(names);
}

void CsvWriter::row(const std::vector<std::string>& cells) {
  if (cells.size() != columns_.size()) {
    throw std::logic_error("CSV row has " + std::to_string(cells.size()) + " cells for " +
                           std::to_string(columns_.size()) + " columns");
  }
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i) out_->put(',');
    *out_ << quote(cells[i]);
  }
  *out_ << "\r\n";
  if (!*out_) throw std::runtime_error("error writing summary file '" + path_ + "'");
}

void CsvWriter::flush() { out_->flush(); }

void CsvWriter::close() {
  if (file_) file_->commit();
}

std::string csv_number(double v) {
  char buf[64];
  if (std::fabs(v - std::round(v)) < 1e-9 && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

}  // namespace npusim::traces
