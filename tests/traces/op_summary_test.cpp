#include "traces/op_summary.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

namespace npusim::traces {
namespace {

TEST(CsvWriter, HeaderCarriesUnitsAndRowsAreQuoted) {
  std::ostringstream out;
  CsvWriter w(out, {{"Task ID", "", "task id"}, {"Op Name", "", "name"}, {"Duration", "us", "time"}});
  w.row({"1", "MatMul,bias", csv_number(12.5)});
  w.row({"2", "say \"hi\"", csv_number(3)});
  EXPECT_EQ(out.str(),
            "Task ID,Op Name,Duration(us)\r\n"
            "1,\"MatMul,bias\",12.5\r\n"
            "2,\"say \"\"hi\"\"\",3\r\n");
}

TEST(CsvWriter, WrongCellCountIsABug) {
  std::ostringstream out;
  CsvWriter w(out, {{"a", "", ""}, {"b", "", ""}});
  EXPECT_THROW(w.row({"1"}), std::logic_error);
}

TEST(CsvWriter, UnopenableFileNamesThePath) {
  EXPECT_THROW(CsvWriter("/nonexistent-dir/s.csv", {{"a", "", ""}}), std::runtime_error);
}

}  // namespace
}  // namespace npusim::traces
