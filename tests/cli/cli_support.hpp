// Running the npusim binary from tests: exit status, stdout and stderr of one call.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace npusim_test {

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

inline Result run(const std::string& args) {
  // One stderr file per call and process: ctest runs the cases of this binary in parallel.
  static int calls = 0;  // per process
  const std::string err_path = ::testing::TempDir() + "npusim_cli_stderr." + std::to_string(getpid()) + "." +
                               std::to_string(calls++) + ".txt";
  const std::string cmd = std::string(NPUSIM_BINARY) + " " + args + " 2>" + err_path;
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
}

// The JSON a call printed, which must have succeeded. A failed call ends the test with an exception (gtest reports
// it) rather than handing back an object whose keys the test would then read past.
inline nlohmann::json json_of_success(const Result& r, const std::string& args) {
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  if (r.status != 0) throw std::runtime_error("npusim " + args + " failed: " + r.err);
  return nlohmann::json::parse(r.out);
}

// `npusim op ARGS --json`, expected to succeed.
inline nlohmann::json op_json(const std::string& args) { return json_of_success(run("op " + args + " --json"), args); }

// Calls that must fail as bad input (exit status 1) with `message` in stderr.
struct ErrorCase {
  std::string args, message;
};
inline void expect_input_errors(const std::vector<ErrorCase>& cases) {
  for (const ErrorCase& c : cases) {
    Result r = run(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

inline std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace npusim_test
