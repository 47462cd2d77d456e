#include "stack/graph/activations.hpp"

#include <cstdio>

namespace npusim::stack::graph {

namespace {

// A float literal that reads back to the same fp32 value.
std::string lit(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

}  // namespace

// Each form is exact for every x (no comparisons exist in the expression language): the negative part comes from
// min(x, 0), so exp(min(x, 0)) - 1 is 0 where x > 0; softplus is relu(x) + log(1 + exp(-|x|)), which does not
// overflow for large x as log(1 + exp(x)) would.
std::optional<std::string> activation_expr(const Node& n, const std::string& x) {
  if (!n.domain.empty()) return std::nullopt;
  const std::string& op = n.op_type;
  const std::string neg_part = "min(" + x + ",0)", expm1_neg = "sub(exp(" + neg_part + "),1)";
  if (op == "LeakyRelu") return "add(relu(" + x + "),mul(" + neg_part + "," + lit(n.attr_float("alpha", 0.01f)) + "))";
  if (op == "Elu") return "add(relu(" + x + "),mul(" + expm1_neg + "," + lit(n.attr_float("alpha", 1.0f)) + "))";
  if (op == "Selu") {
    const float alpha = n.attr_float("alpha", 1.67326319217681884765625f), gamma = n.attr_float("gamma", 1.05070102214813232421875f);
    return "mul(add(relu(" + x + "),mul(" + expm1_neg + "," + lit(alpha) + "))," + lit(gamma) + ")";
  }
  if (op == "HardSigmoid")
    return "max(min(add(mul(" + x + "," + lit(n.attr_float("alpha", 0.2f)) + ")," + lit(n.attr_float("beta", 0.5f)) + "),1),0)";
  if (op == "Softplus") return "add(relu(" + x + "),log(add(exp(neg(abs(" + x + "))),1)))";
  if (op == "Softsign") return "div(" + x + ",add(abs(" + x + "),1))";
  return std::nullopt;
}

}  // namespace npusim::stack::graph
