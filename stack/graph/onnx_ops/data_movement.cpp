// Data movement: Slice, Concat, Split, Gather (host only), Expand and Transpose. On the device they are strided
// copy jobs (stack/ops/copy.cpp) and the transpose op.
#include <algorithm>

#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {

namespace {

std::vector<HostArray> fold_slice(const FoldArgs& a) {
  const HostArray &x = a.need(0), &st = a.need(1), &en = a.need(2);
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  std::vector<std::int64_t> axes, steps;
  if (const HostArray* ax = a.optional(3))
    axes = ax->i;
  else
    for (std::int64_t d = 0; d < static_cast<std::int64_t>(st.i.size()); ++d) axes.push_back(d);
  if (const HostArray* sp = a.optional(4))
    steps = sp->i;
  else
    steps.assign(axes.size(), 1);
  std::vector<std::int64_t> start(x.shape.size(), 0), step(x.shape.size(), 1), shape = x.shape;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const auto ax = static_cast<std::size_t>(norm_axis(axes[k], rank));
    const std::int64_t dim = x.shape[ax], s = steps.at(k);
    if (s == 0) throw NoFold{};
    std::int64_t b = st.i.at(k), e = en.i.at(k);
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (s > 0) {
      b = std::clamp<std::int64_t>(b, 0, dim);
      e = std::clamp<std::int64_t>(e, 0, dim);
      shape[ax] = e > b ? (e - b + s - 1) / s : 0;
    } else {
      if (dim == 0) throw NoFold{};
      b = std::clamp<std::int64_t>(b, 0, dim - 1);
      e = std::clamp<std::int64_t>(e, -1, dim - 1);
      shape[ax] = b > e ? (b - e - s - 1) / -s : 0;
    }
    start[ax] = b;
    step[ax] = s;
  }
  const auto xs = strides_of(x.shape), os = strides_of(shape);
  return {gather_elems(x, shape, [&](std::int64_t k) {
    std::int64_t src = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) src += (start[d] + (k / os[d]) % shape[d] * step[d]) * xs[d];
    return src;
  })};
}

void lower_slice(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0);
  const ops::Shape s = l.t(x).desc.shape;
  const auto starts = l.ints_of(n, 1, "starts"), ends = l.ints_of(n, 2, "ends");
  std::vector<std::int64_t> axes = l.ints_of(n, 3, "axes"), steps = l.ints_of(n, 4, "steps");
  if (axes.empty())
    for (std::size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<std::int64_t>(d));
  if (steps.empty()) steps.assign(axes.size(), 1);
  if (starts.size() != axes.size() || ends.size() != axes.size() || steps.size() != axes.size())
    l.fail(n, "starts, ends, axes and steps differ in length");
  std::vector<std::int64_t> b(s.size(), 0), e(s.begin(), s.end()), st(s.size(), 1);
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const auto d = static_cast<std::size_t>(l.axis_in(n, axes[k], s.size()));
    if (steps[k] <= 0) l.fail(n, "negative steps are not supported");
    b[d] = starts[k];
    e[d] = std::min<std::int64_t>(ends[k], static_cast<std::int64_t>(s[d]));
    st[d] = steps[k];
  }
  l.step(n, "slice", ops::SliceCall{b, e, st}, {x}, {l.out(n, 0)});
}

std::vector<HostArray> fold_concat(const FoldArgs& a) {
  const HostArray& x = a.need(0);
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t axis = norm_axis(a.node.attr_int("axis", 0), rank);
  std::vector<std::int64_t> shape = x.shape;
  shape[static_cast<std::size_t>(axis)] = 0;
  for (std::size_t k = 0; k < a.in.size(); ++k)
    shape[static_cast<std::size_t>(axis)] += a.need(k).shape.at(static_cast<std::size_t>(axis));
  HostArray out = make(
      x.type, shape, [](std::int64_t) { return 0.0; }, [](std::int64_t) { return std::int64_t{0}; });
  const auto st = strides_of(shape);
  std::int64_t at = 0;
  for (std::size_t k = 0; k < a.in.size(); ++k) {
    const HostArray& p = a.need(k);
    if (p.shape.size() != shape.size() || p.is_int() != out.is_int()) throw NoFold{};
    const auto ps = strides_of(p.shape);
    for (std::int64_t e = 0; e < p.size(); ++e) {
      std::int64_t rem = e, dst = 0;
      for (std::size_t d = 0; d < shape.size(); ++d) {
        const std::int64_t c = rem / ps[d];
        rem %= ps[d];
        dst += (c + (static_cast<std::int64_t>(d) == axis ? at : 0)) * st[d];
      }
      if (out.is_int())
        out.i[static_cast<std::size_t>(dst)] = p.i[static_cast<std::size_t>(e)];
      else
        out.f[static_cast<std::size_t>(dst)] = p.f[static_cast<std::size_t>(e)];
    }
    at += p.shape[static_cast<std::size_t>(axis)];
  }
  return {out};
}

void lower_concat(Lowerer& l, const Node& n) {
  std::vector<int> ins;
  for (std::size_t k = 0; k < n.inputs.size(); ++k) ins.push_back(l.in(n, k));
  const std::int64_t axis = l.axis_in(n, n.attr_int("axis", 0), l.t(ins[0]).desc.shape.size());
  l.step(n, "concat", ops::ConcatCall{axis}, ins, {l.out(n, 0)});
}

void lower_split(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0);
  const ops::Shape s = l.t(x).desc.shape;
  const std::int64_t axis = l.axis_in(n, n.attr_int("axis", 0), s.size());
  std::vector<std::int64_t> sizes = l.ints_of(n, 1, "split");
  if (const Attribute* a = n.attr("split")) sizes = a->ints;
  std::vector<int> outs;
  for (std::size_t k = 0; k < n.outputs.size(); ++k) {
    outs.push_back(l.out(n, k));
    if (sizes.size() < n.outputs.size())
      sizes.push_back(static_cast<std::int64_t>(l.t(outs.back()).desc.shape[static_cast<std::size_t>(axis)]));
  }
  sizes.resize(n.outputs.size());
  l.step(n, "split", ops::SplitCall{axis, sizes}, {x}, outs);
}

std::vector<HostArray> fold_gather(const FoldArgs& a) {
  const HostArray &x = a.need(0), &idx = a.need(1);
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t axis = norm_axis(a.node.attr_int("axis", 0), rank);
  std::vector<std::int64_t> shape(x.shape.begin(), x.shape.begin() + axis);
  shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  std::int64_t inner = 1;
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[static_cast<std::size_t>(d)];
  const std::int64_t dim = x.shape[static_cast<std::size_t>(axis)], ni = idx.size();
  return {gather_elems(x, shape, [&](std::int64_t k) {
    const std::int64_t o = k / (ni * inner), j = (k / inner) % ni, r = k % inner;
    std::int64_t id = idx.i.at(static_cast<std::size_t>(j));
    if (id < 0) id += dim;
    if (id < 0 || id >= dim) throw NoFold{};
    return (o * dim + id) * inner + r;
  })};
}

std::vector<HostArray> fold_expand(const FoldArgs& a) {
  const HostArray &x = a.need(0), &s = a.need(1);
  const auto shape = broadcast_shape({x.shape, s.i});
  return {gather_elems(x, shape, [&](std::int64_t k) { return bcast_index(x.shape, shape, k); })};
}

void lower_expand(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  l.step(n, "expand", ops::ExpandCall{l.t(o).desc.shape}, {x}, {o});
}

std::vector<HostArray> fold_transpose(const FoldArgs& a) {
  const HostArray& x = a.need(0);
  std::vector<std::int64_t> perm;
  if (const Attribute* p = a.node.attr("perm"))
    perm = p->ints;
  else
    for (std::size_t d = x.shape.size(); d-- > 0;) perm.push_back(static_cast<std::int64_t>(d));
  if (perm.size() != x.shape.size()) throw NoFold{};
  std::vector<std::int64_t> shape(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) shape[d] = x.shape.at(static_cast<std::size_t>(perm[d]));
  const auto xs = strides_of(x.shape), os = strides_of(shape);
  return {gather_elems(x, shape, [&](std::int64_t k) {
    std::int64_t src = 0;
    for (std::size_t d = 0; d < shape.size(); ++d)
      src += (k / os[d]) % shape[d] * xs[static_cast<std::size_t>(perm[d])];
    return src;
  })};
}

// A permutation as transpose steps the op takes (the last dim stays last, or the last two swap): at most three,
//   keep-last: [others, p[r-1], r-1] -> swap the last two -> keep-last: p,
// with `others` the remaining dims in p's order; steps that would not move anything are left out.
void lower_transpose(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape s = l.t(x).desc.shape;
  const std::size_t r = s.size();
  std::vector<std::size_t> p;
  if (const Attribute* a = n.attr("perm")) {
    for (auto v : a->ints) p.push_back(static_cast<std::size_t>(l.axis_in(n, v, r)));
  } else {
    for (std::size_t i = r; i-- > 0;) p.push_back(i);  // ONNX's default reverses the dims
  }
  std::vector<std::size_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < r; ++i)
    if (sorted[i] != i || p.size() != r) l.fail(n, "perm is not a permutation of the " + std::to_string(r) + " dims");
  // Permutes `cur` (the current dim order, as input dims) to `want` with one transpose step.
  int at = x;
  std::vector<std::size_t> cur(r);
  for (std::size_t i = 0; i < r; ++i) cur[i] = i;
  auto apply = [&](const std::vector<std::size_t>& want, bool last) {
    if (want == cur) return;
    std::vector<std::size_t> q;
    ops::Shape shape;
    for (std::size_t d : want) {
      q.push_back(static_cast<std::size_t>(std::find(cur.begin(), cur.end(), d) - cur.begin()));
      shape.push_back(s[d]);
    }
    const int dst = last ? o
                         : l.temp(n.name + "/step" + std::to_string(l.program().steps.size()),
                                  ops::TensorDesc{shape, l.t(x).desc.dtype});
    l.step(n, "transpose", ops::TransposeCall{q}, {at}, {dst});
    at = dst;
    cur = want;
  };
  const bool direct = r < 2 || p[r - 1] == r - 1 || (p[r - 1] == r - 2 && p[r - 2] == r - 1);
  if (direct) {
    apply(p, true);
    if (at != o) l.view(n, n.outputs[0], at);  // the identity permutation
    return;
  }
  std::vector<std::size_t> others;
  for (std::size_t d : p)
    if (d != p[r - 1] && d != r - 1) others.push_back(d);
  std::vector<std::size_t> first = others, second = others;
  first.insert(first.end(), {p[r - 1], r - 1});
  second.insert(second.end(), {r - 1, p[r - 1]});
  apply(first, false);
  apply(second, second == p);
  apply(p, true);
}

}  // namespace

void add_data_movement(std::vector<OpInfo>& table) {
  table.push_back(OpInfo::onnx("Slice", 3, 5)
                      .folds(fold_slice)
                      .lowers(lower_slice, "`slice` (positive steps; a strided copy job)"));
  table.push_back(
      OpInfo::onnx("Concat", 1, kVariadic).reads({"axis"}).folds(fold_concat).lowers(lower_concat, "`concat`"));
  table.push_back(OpInfo::onnx("Split", 1, 2)
                      .reads({"axis", "split"})
                      .lowers(lower_split, "`split` (sizes from the input, the attribute or the outputs' shapes)"));
  table.push_back(OpInfo::onnx("Gather", 2, 2).reads({"axis"}).folds(fold_gather));
  table.push_back(OpInfo::onnx("Expand", 2, 2).folds(fold_expand).lowers(lower_expand, "`expand`"));
  table.push_back(OpInfo::onnx("Transpose", 1, 1)
                      .reads({"perm"})
                      .folds(fold_transpose)
                      .lowers(lower_transpose,
                              "`transpose`: any permutation as up to three steps the op takes (keep-last, "
                              "swap-last-two, keep-last)"));
}

}  // namespace npusim::stack::graph::onnx_ops
