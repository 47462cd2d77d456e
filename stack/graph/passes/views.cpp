#include "stack/graph/passes/views.hpp"

#include <algorithm>
#include <deque>

#include "stack/graph/passes/match.hpp"

namespace npusim::stack::graph::passes {

namespace {

// Merges neighbouring atoms that are contiguous with each other (outer stride = inner size x inner stride).
std::vector<Atom> merged(const std::vector<Atom>& in) {
  std::vector<Atom> out;
  for (const Atom& a : in) {
    if (a.size == 1) continue;
    if (!out.empty() && out.back().stride == a.size * a.stride) {
      out.back() = Atom{out.back().size * a.size, a.stride};
      continue;
    }
    out.push_back(a);
  }
  return out;
}

// A Gather of one constant index ([] or [1]): the slice at that index along its axis (PyTorch's `select`, which
// exporters write for `qkv[0]` of a packed projection).
bool is_select(const Graph& g, const Node& n) {
  if (n.op_type != "Gather" || !n.domain.empty() || n.inputs.size() != 2 || n.inputs[1] == kNoValue) return false;
  const Value& idx = g.value(n.inputs[1]);
  return idx.constant && idx.constant->elements() == 1 && idx.constant->shape.size() <= 1 &&
         (idx.type == ElemType::kInt64 || idx.type == ElemType::kInt32);
}

bool is_layout_op(const Graph& g, const Node& n) {
  static const char* ops[] = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Expand", "Split", "Slice"};
  return (n.domain.empty() &&
          std::any_of(std::begin(ops), std::end(ops), [&](const char* o) { return n.op_type == o; })) ||
         is_select(g, n);
}

bool is_bijective_layout_op(const Node& n) {
  static const char* ops[] = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"};
  return n.domain.empty() && std::any_of(std::begin(ops), std::end(ops), [&](const char* o) { return n.op_type == o; });
}

std::vector<std::int64_t> perm_of(const Node& n, std::size_t rank) {
  std::vector<std::int64_t> p;
  if (const Attribute* a = n.attr("perm")) return a->ints;
  for (std::size_t i = rank; i-- > 0;) p.push_back(static_cast<std::int64_t>(i));
  return p;
}

std::vector<std::int64_t> constant_ints(const Graph& g, const Node& n, std::size_t input) {
  if (input >= n.inputs.size() || n.inputs[input] == kNoValue) return {};
  const Value& v = g.value(n.inputs[input]);
  return v.constant ? v.constant->as_ints() : std::vector<std::int64_t>{};
}

// Applies node `n` (a layout op with input shape `in` and output `out`) to the view; `output` is which output.
bool apply(const Graph& g, const Node& n, std::size_t output, const std::vector<std::int64_t>& in,
           const std::vector<std::int64_t>& out, View* v) {
  const std::string& op = n.op_type;
  if (op == "Transpose") return v->transpose(perm_of(n, in.size()));
  if (op == "Expand") return v->expand(out);
  if (op == "Identity") return true;
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten") return v->reshape(out);
  if (op == "Split") {
    const auto r = static_cast<std::int64_t>(in.size());
    std::int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return false;
    std::int64_t start = 0;
    for (std::size_t k = 0; k < output; ++k) {
      const auto s = static_shape(g.value(n.outputs[k]));
      if (!s) return false;
      start += (*s)[static_cast<std::size_t>(axis)];
    }
    return v->slice(static_cast<std::size_t>(axis), start, out[static_cast<std::size_t>(axis)], 1);
  }
  if (op == "Gather") {
    const auto r = static_cast<std::int64_t>(in.size());
    std::int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return false;
    const std::int64_t dim = in[static_cast<std::size_t>(axis)];
    std::int64_t at = g.value(n.inputs[1]).constant->as_ints().at(0);
    if (at < 0) at += dim;
    if (at < 0 || at >= dim) return false;
    return v->slice(static_cast<std::size_t>(axis), at, 1, 1) && v->reshape(out);
  }
  if (op == "Slice") {
    const auto starts = constant_ints(g, n, 1), ends = constant_ints(g, n, 2);
    auto axes = constant_ints(g, n, 3), steps = constant_ints(g, n, 4);
    if (starts.empty() || starts.size() != ends.size()) return false;
    if (axes.empty()) for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
    if (steps.empty()) steps.assign(axes.size(), 1);
    if (axes.size() != starts.size() || steps.size() != axes.size()) return false;
    const auto r = static_cast<std::int64_t>(in.size());
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const std::int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
      if (a < 0 || a >= r || steps[k] <= 0) return false;
      const std::int64_t dim = in[static_cast<std::size_t>(a)];
      const std::int64_t b = std::clamp<std::int64_t>(starts[k] < 0 ? starts[k] + dim : starts[k], 0, dim);
      if (!v->slice(static_cast<std::size_t>(a), b, out[static_cast<std::size_t>(a)], steps[k])) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

std::optional<std::vector<std::int64_t>> static_shape(const Value& v) {
  if (!v.shape) return std::nullopt;
  std::vector<std::int64_t> s;
  for (const Dim& d : *v.shape) {
    if (!d.known()) return std::nullopt;
    s.push_back(d.value);
  }
  return s;
}

View View::contiguous(const std::vector<std::int64_t>& shape) {
  View v;
  std::int64_t stride = 1;
  v.dims_.resize(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1) v.dims_[d] = {Atom{shape[d], stride}};
    stride *= shape[d];
  }
  return v;
}

std::int64_t View::size(std::size_t d) const {
  std::int64_t n = 1;
  for (const Atom& a : dims_[d]) n *= a.size;
  return n;
}

std::vector<std::int64_t> View::shape() const {
  std::vector<std::int64_t> s;
  for (std::size_t d = 0; d < dims_.size(); ++d) s.push_back(size(d));
  return s;
}

std::optional<std::int64_t> View::simple_stride(std::size_t d) const {
  if (dims_[d].empty()) return 0;
  if (dims_[d].size() == 1) return dims_[d][0].stride;
  return std::nullopt;
}

bool View::transpose(const std::vector<std::int64_t>& perm) {
  if (perm.size() != dims_.size()) return false;
  std::vector<std::vector<Atom>> out;
  for (auto p : perm) {
    if (p < 0 || static_cast<std::size_t>(p) >= dims_.size()) return false;
    out.push_back(dims_[static_cast<std::size_t>(p)]);
  }
  dims_ = std::move(out);
  return true;
}

bool View::reshape(const std::vector<std::int64_t>& shape) {
  std::vector<Atom> flat;
  for (const auto& d : dims_) flat.insert(flat.end(), d.begin(), d.end());
  const std::vector<Atom> whole = merged(flat);  // contiguous across dims too: [2, 3] -> [3, 2] is one run of 6
  std::deque<Atom> atoms(whole.begin(), whole.end());
  std::vector<std::vector<Atom>> out;
  for (std::int64_t target : shape) {
    std::vector<Atom> dim;
    std::int64_t cur = 1;
    while (cur < target) {
      if (atoms.empty() || target % cur != 0) return false;
      Atom& a = atoms.front();
      const std::int64_t need = target / cur;
      if (a.size <= need && need % a.size == 0) {
        dim.push_back(a);
        cur *= a.size;
        atoms.pop_front();
      } else if (a.size % need == 0) {  // the atom splits: its outer part completes this dim
        dim.push_back(Atom{need, a.stride * (a.size / need)});
        a.size /= need;
        cur = target;
      } else {
        return false;
      }
    }
    if (cur != target) return false;
    out.push_back(merged(dim));
  }
  if (!atoms.empty()) return false;
  dims_ = std::move(out);
  return true;
}

bool View::expand(const std::vector<std::int64_t>& shape) {
  if (shape.size() < dims_.size()) return false;
  dims_.insert(dims_.begin(), shape.size() - dims_.size(), std::vector<Atom>{});
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const std::int64_t s = size(d);
    if (s == shape[d]) continue;
    if (s != 1) return false;
    dims_[d] = {Atom{shape[d], 0}};
  }
  return true;
}

bool View::slice(std::size_t dim, std::int64_t start, std::int64_t len, std::int64_t step) {
  if (dim >= dims_.size() || len <= 0) return false;
  const auto st = simple_stride(dim);
  if (!st) return false;
  offset_ += start * *st;
  dims_[dim] = len == 1 ? std::vector<Atom>{} : std::vector<Atom>{Atom{len, *st * step}};
  return true;
}

std::optional<View> view_of(const Graph& g, ValueId v, ValueId* base, std::vector<NodeId>* nodes) {
  std::vector<std::pair<NodeId, std::size_t>> chain;  // (node, output index), from v back to the base
  ValueId cur = v;
  for (;;) {
    const NodeId p = g.value(cur).producer;
    if (p < 0 || !g.node(p).alive || !is_layout_op(g, g.node(p))) break;
    const Node& n = g.node(p);
    const std::size_t out = static_cast<std::size_t>(std::find(n.outputs.begin(), n.outputs.end(), cur) - n.outputs.begin());
    chain.push_back({p, out});
    cur = n.inputs.at(0);
  }
  *base = cur;
  std::optional<View> view;
  if (const auto base_shape = static_shape(g.value(cur))) view = View::contiguous(*base_shape);
  std::vector<NodeId> walked;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node& n = g.node(it->first);
    const ValueId out_v = n.outputs[it->second];
    const auto in = static_shape(g.value(n.inputs[0])), out = static_shape(g.value(out_v));
    if (view && in && out && apply(g, n, it->second, *in, *out, &*view)) {
      walked.push_back(it->first);
      continue;
    }
    // Not a strided view of what came before (a select on a merged dim, a negative step): this node's output is a
    // buffer of its own, which the node stays to compute, and the walk goes on from it.
    *base = out_v;
    view = out ? std::optional<View>(View::contiguous(*out)) : std::nullopt;
    walked.clear();
  }
  if (view) nodes->insert(nodes->end(), walked.begin(), walked.end());
  return view;
}

std::optional<View> view_into(const Graph& g, ValueId v, ValueId* final, std::vector<NodeId>* nodes) {
  std::vector<NodeId> chain;
  ValueId cur = v;
  while (single_use(g, cur)) {
    const NodeId c = g.value(cur).consumers[0];
    const Node& n = g.node(c);
    if (!is_bijective_layout_op(n) || n.inputs[0] != cur) break;
    chain.push_back(c);
    cur = n.outputs[0];
  }
  *final = cur;
  const auto final_shape = static_shape(g.value(cur));
  if (!final_shape) return std::nullopt;
  View view = View::contiguous(*final_shape);
  // Backwards: each node's inverse (the inverse permutation; a reshape back to the node's input shape).
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node& n = g.node(*it);
    const auto in = static_shape(g.value(n.inputs[0]));
    if (!in) return std::nullopt;
    if (n.op_type == "Transpose") {
      const auto p = perm_of(n, in->size());
      std::vector<std::int64_t> inv(p.size());
      for (std::size_t k = 0; k < p.size(); ++k) {
        if (p[k] < 0 || static_cast<std::size_t>(p[k]) >= p.size()) return std::nullopt;
        inv[static_cast<std::size_t>(p[k])] = static_cast<std::int64_t>(k);
      }
      if (!view.transpose(inv)) return std::nullopt;
    } else if (n.op_type != "Identity" && !view.reshape(*in)) {
      return std::nullopt;
    }
    nodes->push_back(*it);
  }
  return view;
}

}  // namespace npusim::stack::graph::passes
