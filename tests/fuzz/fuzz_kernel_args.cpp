// libFuzzer target: the kernel SDK's argument and tiling parsing (`npusim kernel FILE.cpp --arg NAME=SPEC
// --tiling ... --tiling-schema FILE.json`). The input is three parts split by lines "----": --arg specs (one per
// line; a .npy spec is not read here), the tiling schema's JSON, and the tiling values (k=v,... or, when the part
// starts with '{', a values file's JSON). Bad input must end in InputError.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "cli/kernel_args.hpp"
#include "common/util/error.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer's entry point
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts(1);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line == "----" && parts.size() < 3)
      parts.emplace_back();
    else
      parts.back() += line + "\n";
  }
  parts.resize(3);
  std::istringstream args(parts[0]);
  std::size_t i = 0;
  for (std::string line; std::getline(args, line); ++i) {
    if (line.size() >= 4 && line.compare(line.size() - 4, 4, ".npy") == 0) continue;  // files: fuzz_npy's
    try {
      npusim::cli::parse_kernel_arg(line, i);
    } catch (const npusim::InputError&) {
    }
  }
  try {
    std::string values = parts[2];
    if (!values.empty() && values.back() == '\n') values.pop_back();
    const bool json = !values.empty() && values[0] == '{';
    npusim::cli::tiling_bytes_from(parts[1], "schema.json", values, json ? "values.json" : "");
  } catch (const npusim::InputError&) {
  }
  return 0;
}
