// Arithmetic over named values, for a sweep's derived config keys ("buffers.ub.size * 2") and derived metrics
// ("op.flops / kernel.time_us / 1e6"): numbers, names (letters, digits, '_' and '.', starting with a letter),
// + - * / and parentheses, and the functions min, max, sqrt, log2, floor, ceil, round.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npusim::cli::sweep {

// A name's value, or nullopt when it has none.
using Lookup = std::function<std::optional<double>(std::string_view name)>;

// Throws InputError naming the expression and what is wrong (a syntax error with its position, an unknown name,
// a division by zero, a non-finite result).
double eval_expr(std::string_view expr, const Lookup& lookup);

// The names an expression reads, in order of first use (for dependency order and checks); throws on syntax errors.
std::vector<std::string> expr_names(std::string_view expr);

}  // namespace npusim::cli::sweep
