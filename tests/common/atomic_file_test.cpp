// AtomicFile (common/util/atomic_file.hpp): a file appears under its name complete or not at all, and a file that
// was there before survives a writer that gave up.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/util/atomic_file.hpp"
#include "common/util/error.hpp"

namespace npusim {
namespace {

namespace fs = std::filesystem;

std::string contents(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The files in `dir` (names only).
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

fs::path fresh_dir(const char* name) {
  fs::path dir = fs::path(::testing::TempDir()) / (std::string(name) + "." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(AtomicFile, TheFileAppearsOnlyWhenCommitted) {
  const fs::path dir = fresh_dir("atomic_commit");
  const fs::path path = dir / "out.json";
  {
    AtomicFile f(path.string());
    f.stream() << "{\"a\": 1}";
    f.stream().flush();
    EXPECT_FALSE(fs::exists(path));  // written so far, but not under its name
    EXPECT_EQ(listing(dir).size(), 1u);
    f.commit();
    f.commit();  // a second commit does nothing
  }
  EXPECT_EQ(contents(path), "{\"a\": 1}");
  EXPECT_EQ(listing(dir), std::vector<std::string>{"out.json"});  // no temporary left
}

TEST(AtomicFile, AWriterThatGivesUpLeavesTheEarlierFileAndNoTemporary) {
  const fs::path dir = fresh_dir("atomic_abandon");
  const fs::path path = dir / "trace.json";
  write_file_atomically(path.string(), "complete");
  {
    AtomicFile f(path.string());
    f.stream() << "half";  // e.g. the run failed here and the writer was destroyed while the error propagated
  }
  EXPECT_EQ(contents(path), "complete");
  EXPECT_EQ(listing(dir), std::vector<std::string>{"trace.json"});
}

TEST(AtomicFile, AnUnwritablePlaceIsAnInputErrorNamingThePath) {
  try {
    AtomicFile f("/nonexistent-dir/out.csv");
    FAIL() << "opened a file in a missing directory";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/out.csv: cannot be written"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npusim
