// The config reference page (docs/config.md), generated from the schema declaration.
#pragma once

#include <string>

namespace npusim::config {

std::string schema_markdown();

}  // namespace npusim::config
