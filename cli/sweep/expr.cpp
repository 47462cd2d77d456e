#include "cli/sweep/expr.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "common/util/error.hpp"

namespace npusim::cli::sweep {

namespace {

// A recursive-descent evaluator; with `lookup` unset it only collects names.
class Parser {
 public:
  Parser(std::string_view text, const Lookup* lookup, std::vector<std::string>* names)
      : s_(text), lookup_(lookup), names_(names) {}

  double run() {
    const double v = sum();
    skip();
    if (i_ < s_.size()) fail("unexpected '" + std::string(1, s_[i_]) + "'");
    if (lookup_ && !std::isfinite(v)) fail("the result is not finite");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError("expression '" + std::string(s_) + "': " + what + " at position " + std::to_string(i_ + 1));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  double sum() {
    double v = product();
    for (;;) {
      if (eat('+')) v += product();
      else if (eat('-')) v -= product();
      else return v;
    }
  }
  double product() {
    double v = unary();
    for (;;) {
      if (eat('*')) {
        v *= unary();
      } else if (eat('/')) {
        const double d = unary();
        if (lookup_ && d == 0) fail("division by zero");
        v = lookup_ ? v / d : 0;
      } else {
        return v;
      }
    }
  }
  double unary() {
    if (eat('-')) return -unary();
    if (eat('+')) return unary();
    return primary();
  }
  double primary() {
    skip();
    if (i_ >= s_.size()) fail("a value is missing");
    if (eat('(')) {
      const double v = sum();
      if (!eat(')')) fail("')' is missing");
      return v;
    }
    const char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const std::string rest(s_.substr(i_));
      char* end = nullptr;
      const double v = std::strtod(rest.c_str(), &end);
      if (end == rest.c_str()) fail("a number is malformed");
      i_ += static_cast<std::size_t>(end - rest.c_str());
      if (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_])))
        fail("a number has a unit (write plain numbers in the key's base unit: bytes, Hz, B/s, ns)");
      return v;
    }
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_') fail("unexpected '" + std::string(1, c) + "'");
    const std::size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '.')) ++i_;
    const std::string name(s_.substr(start, i_ - start));
    if (eat('(')) return call(name);
    if (names_) {
      bool seen = false;
      for (const auto& n : *names_) seen = seen || n == name;
      if (!seen) names_->push_back(name);
    }
    if (!lookup_) return 1;
    const std::optional<double> v = (*lookup_)(name);
    if (!v) {
      i_ = start;
      fail("'" + name + "' has no numeric value");
    }
    return *v;
  }
  double call(const std::string& fn) {
    std::vector<double> args;
    if (!eat(')')) {
      do args.push_back(sum());
      while (eat(','));
      if (!eat(')')) fail("')' is missing after the arguments of " + fn);
    }
    auto need = [&](std::size_t n) {
      if (args.size() != n) fail(fn + " takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s"));
    };
    if (fn == "min" || fn == "max") {
      if (args.empty()) fail(fn + " takes one or more arguments");
      double v = args[0];
      for (double a : args) v = fn == "min" ? std::min(v, a) : std::max(v, a);
      return v;
    }
    need(1);
    const double x = args[0];
    if (fn == "sqrt") return std::sqrt(x);
    if (fn == "log2") return std::log2(x);
    if (fn == "floor") return std::floor(x);
    if (fn == "ceil") return std::ceil(x);
    if (fn == "round") return std::round(x);
    fail("no function '" + fn + "' (min, max, sqrt, log2, floor, ceil, round)");
  }

  std::string_view s_;
  std::size_t i_ = 0;
  const Lookup* lookup_;
  std::vector<std::string>* names_;
};

}  // namespace

double eval_expr(std::string_view expr, const Lookup& lookup) { return Parser(expr, &lookup, nullptr).run(); }

std::vector<std::string> expr_names(std::string_view expr) {
  std::vector<std::string> names;
  Parser(expr, nullptr, &names).run();
  return names;
}

}  // namespace npusim::cli::sweep
