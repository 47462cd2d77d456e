// Prints docs/config.md from the schema declaration, so the page cannot drift from the code (a test compares them).
#include <iostream>

#include "common/config/schema_doc.hpp"

int main() {
  std::cout << npusim::config::schema_markdown();
  return 0;
}
