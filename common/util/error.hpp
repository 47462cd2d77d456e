// Error types shared by every layer. Libraries throw; only the command-line boundary turns an exception into a
// message and an exit status.
#pragma once

#include <stdexcept>
#include <string>

namespace npusim {

// Bad user input: a config file, a command-line argument, a kernel parameter, a model file.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A config problem. The message already names file, line and key.
class ConfigError : public InputError {
 public:
  using InputError::InputError;
};

}  // namespace npusim
