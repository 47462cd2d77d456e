// Elementwise chains: connected elementwise nodes that produce values of one shape become one
// npusim.FusedElementwise node whose `expr` attribute is the chain as an expression over its external inputs (the
// fused_elementwise library op computes it tile by tile in the UB, reading each input and writing the result once).
// x * Sigmoid(x) is recognised as silu(x); the activations with attributes (LeakyRelu, Elu, Selu, HardSigmoid,
// Softplus, Softsign) join as their expressions (onnx_ops/activations.hpp); which ops are elementwise, and their
// functions, the op table says.
//
// A group grows from a root (its output may be used anywhere) towards the producers of its inputs; a producer joins
// when it is elementwise, its output has the root's shape and every use of it is inside the group (so no
// intermediate value is needed outside). An input from outside the group must be a scalar constant (inlined as a
// literal), a tensor of the root's shape, or one that repeats over the root's trailing dims at least
// kMinPeriod elements at a time (shorter periods would cut the fused kernel's tiles too small); a Where's condition
// must be constant. At most eight tensor inputs and kMaxNodes nodes per group; groups of one node stay as they are.
#include <algorithm>
#include <set>

#include "stack/graph/onnx_ops/activations.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"
#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"
#include "stack/graph/passes/views.hpp"

namespace npusim::stack::graph::passes {

namespace {

constexpr std::int64_t kMinPeriod = 2048;
constexpr std::size_t kMaxNodes = 32, kMaxInputs = 8, kMaxExpr = 2048;

// An expression past kMaxExpr characters (values used twice in a group are written out twice).
struct TooLong {};

// The op's function in fused_elementwise expressions ("" for none; activations are written by activation_expr).
const onnx_ops::OpInfo* elementwise_op(const Node& n) {
  const onnx_ops::OpInfo* op = onnx_ops::find_op(n);
  return op && (!op->expression.empty() || op->activation) ? op : nullptr;
}

bool shape_is(const Value& v, const std::vector<std::int64_t>& s) {
  const auto vs = static_shape(v);
  return vs && *vs == s;
}

// An input from outside a group of output shape `out`: a scalar constant, the same shape, or a long enough
// trailing-dims broadcast.
bool external_ok(const Graph& g, ValueId v, const std::vector<std::int64_t>& out, ElemType t, bool condition) {
  const Value& val = g.value(v);
  if (val.constant && val.constant->elements() == 1 && !condition) return true;
  if (condition ? !val.constant : val.type != t) return false;
  auto s = static_shape(val);
  if (!s) return false;
  while (!s->empty() && s->front() == 1) s->erase(s->begin());
  if (s->size() > out.size() || !std::equal(s->begin(), s->end(), out.end() - static_cast<std::ptrdiff_t>(s->size()))) return false;
  std::int64_t period = 1;
  for (auto d : *s) period *= d;
  std::int64_t all = 1;
  for (auto d : out) all *= d;
  return period == all || period >= kMinPeriod;
}

// Whether node n can be in a group whose values have shape `out` and type `t`.
bool fusable(const Graph& g, const Node& n, const std::vector<std::int64_t>& out, ElemType t) {
  const onnx_ops::OpInfo* op = elementwise_op(n);
  if (!op || n.outputs.size() != 1 || !shape_is(g.value(n.outputs[0]), out) || g.value(n.outputs[0]).type != t)
    return false;
  if (n.op_type == "Pow") {
    if (n.inputs.size() != 2) return false;
    const auto e = scalar_constant(g, n.inputs.at(1));
    static const double ok[] = {2.0, 3.0, 0.5, -1.0, -0.5};
    if (!e || std::find(std::begin(ok), std::end(ok), *e) == std::end(ok)) return false;
  }
  // The arity of its function in the expression language (Max and Min of more than two inputs do not join).
  const std::string& fn = op->expression;
  const std::size_t arity =
      fn == "where"                                                                                           ? 3
      : fn == "add" || fn == "sub" || fn == "mul" || fn == "div" || fn == "max" || fn == "min" || fn == "pow" ? 2
                                                                                                              : 1;
  if (n.inputs.size() != arity) return false;
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const ValueId v = n.inputs[k];
    if (v == kNoValue) return false;
    const bool internal_shape = shape_is(g.value(v), out) && g.value(v).type == t && !g.value(v).constant;
    if (!internal_shape && !external_ok(g, v, out, t, n.op_type == "Where" && k == 0)) return false;
  }
  return true;
}

class ExprBuilder {
 public:
  ExprBuilder(const Graph& g, const std::set<NodeId>& group) : g_(g), group_(group) {}
  std::vector<ValueId> inputs;

  std::string of(ValueId v) {
    std::string e = build(v);
    if (e.size() > kMaxExpr) throw TooLong{};
    return e;
  }

 private:
  std::string build(ValueId v) {
    const NodeId p = g_.value(v).producer;
    if (p < 0 || !group_.count(p)) return leaf(v);
    const Node& n = g_.node(p);
    if (n.op_type == "Pow") {
      const double e = *scalar_constant(g_, n.inputs[1]);
      const std::string x = of(n.inputs[0]);
      if (e == 2.0) return "mul(" + x + "," + x + ")";
      if (e == 3.0) return "mul(mul(" + x + "," + x + ")," + x + ")";
      if (e == 0.5) return "sqrt(" + x + ")";
      if (e == -1.0) return "reciprocal(" + x + ")";
      return "rsqrt(" + x + ")";
    }
    if (n.op_type == "Mul") {  // x * Sigmoid(x): silu(x)
      for (int side = 0; side < 2; ++side) {
        const ValueId s = n.inputs[static_cast<std::size_t>(side)], x = n.inputs[static_cast<std::size_t>(1 - side)];
        const NodeId sp = g_.value(s).producer;
        if (sp >= 0 && group_.count(sp) && g_.node(sp).op_type == "Sigmoid" && g_.node(sp).inputs[0] == x) return "silu(" + of(x) + ")";
      }
    }
    const onnx_ops::OpInfo* op = elementwise_op(n);
    if (op->activation) return *onnx_ops::activation_expr(n, of(n.inputs[0]));
    std::string fn = op->expression;
    if (fn == "gelu") {
      const Attribute* a = n.attr("approximate");
      if (a && a->s == "tanh") fn = "gelu_tanh";
    }
    std::string e = fn + "(";
    for (std::size_t k = 0; k < n.inputs.size(); ++k) e += (k ? "," : "") + of(n.inputs[k]);
    return e + ")";
  }

 private:
  std::string leaf(ValueId v) {
    const Value& val = g_.value(v);
    if (val.constant && val.constant->elements() == 1 && (val.type != ElemType::kBool))
      return onnx_ops::num(val.constant->as_doubles()[0]);
    auto it = std::find(inputs.begin(), inputs.end(), v);
    if (it == inputs.end()) {
      inputs.push_back(v);
      it = inputs.end() - 1;
    }
    return "x" + std::to_string(it - inputs.begin());
  }
  const Graph& g_;
  const std::set<NodeId>& group_;
};

}  // namespace

int fuse_elementwise(Graph& g) {
  int fused = 0;
  std::set<NodeId> taken;
  const std::vector<NodeId> order = g.topo_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeId root = *it;
    const Node& r = g.node(root);
    if (!r.alive || taken.count(root) || r.outputs.size() != 1) continue;
    const auto out_shape = static_shape(g.value(r.outputs[0]));
    const ElemType t = g.value(r.outputs[0]).type;
    if (!out_shape || !device_dtype(t) || !fusable(g, r, *out_shape, t)) continue;
    std::set<NodeId> group{root};
    for (bool grew = true; grew && group.size() < kMaxNodes;) {
      grew = false;
      for (NodeId m : std::vector<NodeId>(group.begin(), group.end())) {
        for (ValueId v : g.node(m).inputs) {
          const NodeId p = v == kNoValue ? -1 : g.value(v).producer;
          if (p < 0 || group.count(p) || taken.count(p) || !g.node(p).alive || !fusable(g, g.node(p), *out_shape, t)) continue;
          if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) continue;
          const auto& uses = g.value(v).consumers;
          if (!std::all_of(uses.begin(), uses.end(), [&](NodeId c) { return group.count(c) > 0; })) continue;
          group.insert(p);
          grew = true;
          if (group.size() >= kMaxNodes) break;
        }
        if (group.size() >= kMaxNodes) break;
      }
    }
    if (group.size() < 2) continue;
    ExprBuilder b(g, group);
    std::string expr;
    try {
      expr = b.of(r.outputs[0]);
    } catch (const TooLong&) {
      continue;
    }
    if (b.inputs.size() > kMaxInputs || b.inputs.empty()) continue;
    // A name that says what was fused: the op types in graph order.
    std::string kinds;
    std::size_t listed = 0;
    for (NodeId id : order) {
      if (!group.count(id)) continue;
      if (listed++ < 4) kinds += g.node(id).op_type;
    }
    if (listed > 4) kinds += "_" + std::to_string(listed);
    const ValueId out = r.outputs[0];
    for (NodeId id : group) {
      taken.insert(id);
      g.remove_node(id);
    }
    Node f;
    f.name = "Fused" + kinds + "_" + std::to_string(fused);
    f.op_type = "FusedElementwise";
    f.domain = "npusim";
    f.inputs = b.inputs;
    f.outputs = {out};
    f.attrs["expr"] = Attribute::of_string(expr);
    f.attrs["kernel"] = Attribute::of_string("Fused" + kinds);
    g.add_node(std::move(f));
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
