// Activations with attributes (LeakyRelu, Elu, Selu, HardSigmoid, Softplus, Softsign), PRelu and Clip: no kernel
// of their own, one fused_elementwise expression each.
#include "stack/graph/onnx_ops/activations.hpp"

#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {

// Each form is exact for every x (no comparisons exist in the expression language): the negative part comes from
// min(x, 0), so exp(min(x, 0)) - 1 is 0 where x > 0; softplus is relu(x) + log(1 + exp(-|x|)), which does not
// overflow for large x as log(1 + exp(x)) would. Literals are %.9g, which reads back to the same fp32 value.
std::optional<std::string> activation_expr(const Node& n, const std::string& x) {
  if (!n.domain.empty()) return std::nullopt;
  const std::string& op = n.op_type;
  auto lit = [&](const char* attr, float def) { return num(static_cast<double>(n.attr_float(attr, def))); };
  const std::string neg_part = "min(" + x + ",0)", expm1_neg = "sub(exp(" + neg_part + "),1)";
  if (op == "LeakyRelu") return "add(relu(" + x + "),mul(" + neg_part + "," + lit("alpha", 0.01f) + "))";
  if (op == "Elu") return "add(relu(" + x + "),mul(" + expm1_neg + "," + lit("alpha", 1.0f) + "))";
  if (op == "Selu")
    return "mul(add(relu(" + x + "),mul(" + expm1_neg + "," + lit("alpha", 1.67326319217681884765625f) + "))," +
           lit("gamma", 1.05070102214813232421875f) + ")";
  if (op == "HardSigmoid")
    return "max(min(add(mul(" + x + "," + lit("alpha", 0.2f) + ")," + lit("beta", 0.5f) + "),1),0)";
  if (op == "Softplus") return "add(relu(" + x + "),log(add(exp(neg(abs(" + x + "))),1)))";
  if (op == "Softsign") return "div(" + x + ",add(abs(" + x + "),1))";
  return std::nullopt;
}

namespace {

void lower_activation(Lowerer& l, const Node& n) {
  l.expression(n, n.op_type, {n.inputs.at(0)}, [&](const auto& a) { return *activation_expr(n, a[0]); });
}

void lower_prelu(Lowerer& l, const Node& n) {
  l.expression(n, n.op_type, {n.inputs.at(0), n.inputs.at(1)},
               [](const auto& a) { return "add(relu(" + a[0] + "),mul(min(" + a[0] + ",0)," + a[1] + "))"; });
}

// Bounds as inputs 1 and 2 (opset 11 on) or as attributes (before); min(max(x, lo), hi): hi wins when lo > hi, as
// np.clip; no bounds: the input itself, as Clip's ONNX function says.
void lower_clip(Lowerer& l, const Node& n) {
  std::vector<ValueId> operands{n.inputs.at(0)};
  std::string lo, hi;
  for (std::size_t k = 1; k < 3 && k < n.inputs.size(); ++k)
    if (n.inputs[k] != kNoValue) operands.push_back(n.inputs[k]);
  if (n.inputs.size() == 1) {
    if (const Attribute* a = n.attr("min")) lo = num(a->f);
    if (const Attribute* a = n.attr("max")) hi = num(a->f);
  }
  const bool has_lo = n.inputs.size() > 1 && n.inputs[1] != kNoValue,
             has_hi = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
  if (!has_lo && !has_hi && lo.empty() && hi.empty()) {
    l.view(n, n.outputs[0], l.in(n, 0));
    return;
  }
  l.expression(n, n.op_type, operands, [&](const auto& a) {
    std::size_t k = 1;
    if (has_lo) lo = a[k++];
    if (has_hi) hi = a[k++];
    std::string e = a[0];
    if (!lo.empty()) e = "max(" + e + "," + lo + ")";
    if (!hi.empty()) e = "min(" + e + "," + hi + ")";
    return e;
  });
}

}  // namespace

void add_activations(std::vector<OpInfo>& table) {
  auto activation = [&](const char* type, std::vector<std::string> attrs, const char* form) {
    table.push_back(
        OpInfo::onnx(type, 1, 1)
            .reads(std::move(attrs))
            .in_expressions_as_activation()
            .lowers(lower_activation,
                    std::string("one `fused_elementwise` expression (kernel named after the op): ") + form));
  };
  activation("LeakyRelu", {"alpha"}, "`relu(x) + alpha min(x, 0)`");
  activation("Elu", {"alpha"}, "`relu(x) + alpha (exp(min(x, 0)) - 1)`");
  activation("Selu", {"alpha", "gamma"}, "`gamma (relu(x) + alpha (exp(min(x, 0)) - 1))`");
  activation("HardSigmoid", {"alpha", "beta"}, "`max(min(alpha x + beta, 1), 0)`");
  activation("Softplus", {}, "`relu(x) + log(1 + exp(-abs(x)))` (no overflow for large x)");
  activation("Softsign", {}, "`x / (abs(x) + 1)`");
  table.push_back(OpInfo::onnx("PRelu", 2, 2)
                      .lowers(lower_prelu,
                              "one `fused_elementwise` expression, the slope expanded when it does not "
                              "repeat over the trailing dims"));
  table.push_back(OpInfo::onnx("Clip", 1, 3)
                      .reads({"min", "max"})
                      .lowers(lower_clip,
                              "one `fused_elementwise` expression of `max`/`min` (bounds as inputs or, "
                              "before opset 11, attributes; none: a view)"));
}

}  // namespace npusim::stack::graph::onnx_ops
