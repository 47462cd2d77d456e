// Convolution epilogues, as ATC folds them: a BatchNormalization in inference form (scale, bias, mean and variance
// constant) consuming only a Conv with constant weights folds into them, w' = w s per output channel and
// b' = (b - mean) s + beta with s = scale / sqrt(var + epsilon); a Relu consuming only the (folded) result becomes the
// FixPipe's ReLU. Either makes one npusim.Conv (the Conv's attributes, relu = 0 or 1).
#include <cmath>
#include <cstring>

#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

namespace {

// A float32 constant of `v` with shape `shape`.
ValueId float_constant(Graph& g, const std::string& name, const std::vector<std::int64_t>& shape,
                       const std::vector<float>& v) {
  Tensor t;
  t.type = ElemType::kFloat32;
  t.shape = shape;
  t.bytes.resize(v.size() * sizeof(float));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return g.add_constant(name, std::move(t));
}

// The BatchNormalization consuming only y with every parameter constant and per channel (c values), or -1.
NodeId foldable_norm(const Graph& g, ValueId y, std::int64_t c) {
  if (!single_use(g, y)) return -1;
  const NodeId id = g.value(y).consumers[0];
  const Node& bn = g.node(id);
  if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || !well_formed(bn) || bn.inputs[0] != y) return -1;
  if (bn.attr_int("training_mode", 0) != 0 || bn.outputs.size() > 1) return -1;
  for (std::size_t i = 1; i < 5; ++i) {
    const Value& p = g.value(bn.inputs[i]);
    if (!p.constant || p.constant->elements() != c) return -1;
  }
  return id;
}

}  // namespace

int fuse_conv(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& conv = g.node(id);
    if (!conv.alive || !well_formed(conv) || conv.op_type != "Conv" || !conv.domain.empty()) continue;
    const Value& wv = g.value(conv.inputs[1]);
    if (!wv.constant || wv.constant->shape.size() != 4) continue;
    const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
    if (has_bias && !g.value(conv.inputs[2]).constant) continue;
    const std::int64_t cout = wv.constant->shape[0];
    std::vector<NodeId> removed{id};
    ValueId out = conv.outputs[0];
    ValueId w = conv.inputs[1], b = has_bias ? conv.inputs[2] : kNoValue;
    if (const NodeId bn_id = foldable_norm(g, out, cout); bn_id >= 0) {
      const Node& bn = g.node(bn_id);
      const std::vector<double> scale = g.value(bn.inputs[1]).constant->as_doubles();
      const std::vector<double> beta = g.value(bn.inputs[2]).constant->as_doubles();
      const std::vector<double> mean = g.value(bn.inputs[3]).constant->as_doubles();
      const std::vector<double> var = g.value(bn.inputs[4]).constant->as_doubles();
      const double eps = bn.attr_float("epsilon", 1e-5f);
      std::vector<double> bias(static_cast<std::size_t>(cout), 0.0);
      if (has_bias) bias = g.value(b).constant->as_doubles();
      const std::vector<double> wd = wv.constant->as_doubles();
      const std::size_t per_out = wd.size() / static_cast<std::size_t>(cout);
      std::vector<float> wf(wd.size()), bf(static_cast<std::size_t>(cout));
      for (std::size_t o = 0; o < bf.size(); ++o) {
        const double s = scale[o] / std::sqrt(var[o] + eps);
        for (std::size_t k = 0; k < per_out; ++k) wf[o * per_out + k] = static_cast<float>(wd[o * per_out + k] * s);
        bf[o] = static_cast<float>((bias[o] - mean[o]) * s + beta[o]);
      }
      w = float_constant(g, conv.name + "/w_bn_folded", wv.constant->shape, wf);
      b = float_constant(g, conv.name + "/b_bn_folded", {cout}, bf);
      removed.push_back(bn_id);
      out = bn.outputs[0];
    }
    bool relu = false;
    if (single_use(g, out)) {
      const NodeId next = g.value(out).consumers[0];
      const Node& r = g.node(next);
      if (r.op_type == "Relu" && r.domain.empty() && well_formed(r)) {
        relu = true;
        removed.push_back(next);
        out = r.outputs[0];
      }
    }
    if (removed.size() == 1) continue;  // nothing to fold: the Conv stays as it is
    Node f;
    f.name = "Conv_" + conv.name;
    f.op_type = "Conv";
    f.domain = "npusim";
    f.attrs = conv.attrs;
    f.attrs["relu"] = Attribute::of_int(relu ? 1 : 0);
    f.inputs = {conv.inputs[0], w};
    if (b != kNoValue) f.inputs.push_back(b);
    f.outputs = {out};
    for (NodeId r : removed) g.remove_node(r);
    g.add_node(std::move(f));
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
