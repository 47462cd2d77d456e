#include "cli/run_outputs.hpp"

#include "common/util/error.hpp"

namespace npusim::cli {

std::map<std::string, std::string> parse_params(const std::vector<std::string>& kvs) {
  std::map<std::string, std::string> values;
  for (const std::string& kv : kvs) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("-p '" + kv + "': expected key=value");
    const auto [it, fresh] = values.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    if (!fresh)
      throw InputError("-p " + it->first + " is given twice ('" + it->second + "' and '" + kv.substr(eq + 1) + "')");
  }
  return values;
}

}  // namespace npusim::cli
