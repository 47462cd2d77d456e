// RoPE fusion: rotary position embedding in its rotate_half form,
//   Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, D/2:D)), Slice(x, 0:D/2), axis=-1), sin))   (operands in either order)
// becomes one npusim.RoPE(x, cos, sin). cos and sin hold S x D values (leading 1s allowed) for x of
// [..., S, D]. When x is a Transpose(0, 2, 1, 3) of a [B, S, N, D] tensor (the heads of a projection), the rotation
// runs on that tensor in the BSND layout and the Transpose moves after it, where the attention pass absorbs it.
// Conditions: the Slices halve the last axis with step 1, the Concat joins them on the last axis, every value
// between x and the Add has one consumer and is not a graph output, float types.
#include <algorithm>

#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"
#include "stack/graph/passes/views.hpp"

namespace npusim::stack::graph::passes {

namespace {

// Slice(x, [b, e) on the last axis, step 1): x and the bounds, or false.
bool half_slice(const Graph& g, ValueId v, ValueId* x, std::int64_t* b, std::int64_t* e) {
  const NodeId s = producer(g, v, "Slice");
  if (s < 0 || !single_use(g, v)) return false;
  const Node& n = g.node(s);
  auto ints = [&](std::size_t k) {
    if (k >= n.inputs.size() || n.inputs[k] == kNoValue) return std::vector<std::int64_t>{};
    const Value& c = g.value(n.inputs[k]);
    return c.constant ? c.constant->as_ints() : std::vector<std::int64_t>{{-999}};
  };
  const auto starts = ints(1), ends = ints(2), axes = ints(3), steps = ints(4);
  const auto xs = static_shape(g.value(n.inputs[0]));
  if (!xs || starts.size() != 1 || ends.size() != 1) return false;
  const auto rank = static_cast<std::int64_t>(xs->size());
  const std::int64_t axis = axes.empty() ? 0 : axes[0];
  if (axis != -1 && axis != rank - 1) return false;
  if (!steps.empty() && steps[0] != 1) return false;
  const std::int64_t d = xs->back();
  *b = std::clamp<std::int64_t>(starts[0] < 0 ? starts[0] + d : starts[0], 0, d);
  *e = std::clamp<std::int64_t>(ends[0] < 0 ? ends[0] + d : ends[0], 0, d);
  *x = n.inputs[0];
  return true;
}

// Mul(a, b) with `x` on one side: the other side.
ValueId times(const Graph& g, ValueId v, ValueId x) {
  const NodeId m = producer(g, v, "Mul");
  if (m < 0 || !single_use(g, v)) return kNoValue;
  const Node& n = g.node(m);
  if (n.inputs[0] == x) return n.inputs[1];
  if (n.inputs[1] == x) return n.inputs[0];
  return kNoValue;
}

// A table of S x D values for x of [..., S, D].
bool table_for(const Graph& g, ValueId t, const std::vector<std::int64_t>& xs) {
  const auto ts = static_shape(g.value(t));
  if (!ts || ts->size() < 2) return false;
  for (std::size_t k = 0; k + 2 < ts->size(); ++k)
    if ((*ts)[k] != 1) return false;
  return (*ts)[ts->size() - 1] == xs.back() && (*ts)[ts->size() - 2] == xs[xs.size() - 2];
}

}  // namespace

int fuse_rope(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& add = g.node(id);
    if (!add.alive || !well_formed(add) || add.op_type != "Add" || !add.domain.empty()) continue;
    for (int side = 0; side < 2; ++side) {
      const ValueId cos_term = add.inputs[static_cast<std::size_t>(side)], sin_term = add.inputs[static_cast<std::size_t>(1 - side)];
      // The rotated half: Mul(Concat(Neg(x2), x1), sin).
      const NodeId sm = producer(g, sin_term, "Mul");
      if (sm < 0 || !single_use(g, sin_term)) continue;
      ValueId cat = kNoValue, sin = kNoValue;
      for (int k = 0; k < 2; ++k)
        if (producer(g, g.node(sm).inputs[static_cast<std::size_t>(k)], "Concat") >= 0) {
          cat = g.node(sm).inputs[static_cast<std::size_t>(k)];
          sin = g.node(sm).inputs[static_cast<std::size_t>(1 - k)];
        }
      if (cat == kNoValue || !single_use(g, cat)) continue;
      const Node& concat = g.node(producer(g, cat, "Concat"));
      if (concat.inputs.size() != 2) continue;
      const NodeId neg = producer(g, concat.inputs[0], "Neg");
      if (neg < 0 || !single_use(g, concat.inputs[0])) continue;
      ValueId x = kNoValue, x_again = kNoValue;
      std::int64_t b2 = 0, e2 = 0, b1 = 0, e1 = 0;
      if (!half_slice(g, g.node(neg).inputs[0], &x, &b2, &e2) || !half_slice(g, concat.inputs[1], &x_again, &b1, &e1) || x != x_again)
        continue;
      const auto xs = static_shape(g.value(x));
      if (!xs || xs->size() < 2) continue;
      const std::int64_t d = xs->back();
      const auto rank = static_cast<std::int64_t>(xs->size());
      if (d % 2 || b1 != 0 || e1 != d / 2 || b2 != d / 2 || e2 != d) continue;
      if (concat.attr_int("axis", 0) != -1 && concat.attr_int("axis", 0) != rank - 1) continue;
      const ValueId cos = times(g, cos_term, x);
      if (cos == kNoValue || !table_for(g, cos, *xs) || !table_for(g, sin, *xs)) continue;
      const ElemType t = g.value(x).type;
      if (!device_dtype(t) || g.value(cos).type != t || g.value(sin).type != t) continue;
      // x's uses are the pattern's three (Mul by cos, the two Slices).
      if (g.value(x).consumers.size() != 3) continue;
      const ValueId out = add.outputs[0];
      const std::vector<NodeId> removed{id, sm, producer(g, cat, "Concat"), neg, producer(g, concat.inputs[1], "Slice"),
                                        producer(g, g.node(neg).inputs[0], "Slice"), producer(g, cos_term, "Mul")};
      // The BSND form when x is the heads transpose of a [B, S, N, D] tensor.
      ValueId src = x;
      const NodeId tr = producer(g, x, "Transpose");
      bool bsnd = false;
      if (tr >= 0 && rank == 4) {
        const Attribute* perm = g.node(tr).attr("perm");
        bsnd = perm && perm->ints == std::vector<std::int64_t>{0, 2, 1, 3};
        if (bsnd) src = g.node(tr).inputs[0];
      }
      const std::string name = "RoPE_" + std::to_string(fused) + "_" + g.value(out).name;
      for (NodeId r : removed) g.remove_node(r);
      Node rope;
      rope.name = name;
      rope.op_type = "RoPE";
      rope.domain = "npusim";
      rope.inputs = {src, cos, sin};
      rope.attrs["layout"] = Attribute::of_string(bsnd ? "bsnd" : "bnsd");
      if (bsnd) {  // RoPE on [B, S, N, D], then the heads transpose
        const ValueId r = g.add_value(name + "/bsnd", t, g.value(src).shape);
        rope.outputs = {r};
        g.add_node(std::move(rope));
        Node tn;
        tn.name = name + "/transpose";
        tn.op_type = "Transpose";
        tn.attrs["perm"] = Attribute::of_ints({0, 2, 1, 3});
        tn.inputs = {r};
        tn.outputs = {out};
        // It stands for the imported heads transpose, which goes once RoPE reads its input (when nothing else uses it).
        if (g.value(x).consumers.empty()) tn.origin = g.node(tr).sources();
        g.add_node(std::move(tn));
      } else {
        rope.outputs = {out};
        g.add_node(std::move(rope));
      }
      remove_dead_nodes(g);
      ++fused;
      break;
    }
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
