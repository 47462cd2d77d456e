// libFuzzer target: the chip-config loader (YAML, `extends:` of the built-in configs, `--set` overrides). The input
// is a YAML text; lines after a line "#--set" are taken as --set overrides, one per line. Bad input must end in
// ConfigError or InputError: anything else (a crash, a hang, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer's entry point
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string yaml = text;
  std::vector<std::string> sets;
  if (const auto cut = text.find("#--set\n"); cut != std::string::npos) {
    yaml = text.substr(0, cut);
    std::istringstream rest(text.substr(cut + 7));
    for (std::string line; std::getline(rest, line);) sets.push_back(line);
  }
  try {
    // A relative `extends:` resolves in the current directory; the built-in names need no file.
    npusim::config::load_config_text(yaml, "fuzz.yaml", sets);
  } catch (const npusim::ConfigError&) {
  } catch (const npusim::InputError&) {
  }
  return 0;
}
