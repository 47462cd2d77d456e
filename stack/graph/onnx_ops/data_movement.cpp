// Data movement: Slice, Concat, Split, Gather, GatherND, GatherElements, Expand and Transpose. On the
// device: strided copy jobs (stack/ops/copy.cpp), the transpose op and the gather op.
#include <algorithm>
#include <cstring>
#include <functional>

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

void gather_rows(Lowerer& l, const Node& n, int data, std::uint64_t rows, int idx, int o);
int index_tensor(Lowerer& l, const Node& n, const std::vector<std::int64_t>& rows);

// Slice: the `slice` op over the positive steps; an axis with a negative step is then walked backwards by a gather
// of its rows in the order the step picks (the data seen as [outer x dim, inner] rows, as Gather on an inner axis
// with constant indices runs).
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
  std::vector<std::pair<std::size_t, std::vector<std::int64_t>>> backwards;  // axis, the indices it picks
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const auto d = static_cast<std::size_t>(l.axis_in(n, axes[k], s.size()));
    if (steps[k] == 0) l.fail(n, "a step of 0");
    if (steps[k] < 0) {  // ONNX's clamping for negative steps: start in [0, dim - 1], end in [-1, dim - 1]
      const auto dim = static_cast<std::int64_t>(s[d]);
      std::int64_t from = starts[k] < 0 ? starts[k] + dim : starts[k], to = ends[k] < 0 ? ends[k] + dim : ends[k];
      from = std::clamp<std::int64_t>(from, 0, dim - 1);
      to = std::clamp<std::int64_t>(to, -1, dim - 1);
      std::vector<std::int64_t> picked;
      for (std::int64_t i = from; i > to; i += steps[k]) picked.push_back(i);
      backwards.emplace_back(d, std::move(picked));
      continue;
    }
    b[d] = starts[k];
    e[d] = std::min<std::int64_t>(ends[k], static_cast<std::int64_t>(s[d]));
    st[d] = steps[k];
  }
  if (backwards.empty()) {
    l.step(n, "slice", ops::SliceCall{b, e, st}, {x}, {l.out(n, 0)});
    return;
  }
  int cur = x;
  if (std::any_of(st.begin(), st.end(), [](std::int64_t v) { return v != 1; }) ||
      b != std::vector<std::int64_t>(s.size(), 0) || e != std::vector<std::int64_t>(s.begin(), s.end())) {
    ops::Shape fs = s;  // the forward slice's shape: the backward axes whole
    for (std::size_t d = 0; d < s.size(); ++d) {
      const std::int64_t dim = static_cast<std::int64_t>(s[d]);
      const std::int64_t lo = std::clamp<std::int64_t>(b[d] < 0 ? b[d] + dim : b[d], 0, dim);
      const std::int64_t hi = std::clamp<std::int64_t>(e[d] < 0 ? e[d] + dim : e[d], 0, dim);
      fs[d] = hi > lo ? static_cast<std::uint64_t>((hi - lo + st[d] - 1) / st[d]) : 0;
    }
    cur = l.temp(n.name + "/forward", ops::TensorDesc{fs, l.t(x).desc.dtype});
    l.step(n, "slice", ops::SliceCall{b, e, st}, {x}, {cur});
  }
  for (const auto& [d, picked] : backwards) {
    ops::Shape cs = l.t(cur).desc.shape;
    std::uint64_t outer = 1;
    for (std::size_t i = 0; i < d; ++i) outer *= cs[i];
    std::vector<std::int64_t> rows;
    for (std::uint64_t o = 0; o < outer; ++o)
      for (const std::int64_t i : picked) rows.push_back(static_cast<std::int64_t>(o * cs[d]) + i);
    const std::uint64_t dim = cs[d];
    cs[d] = picked.size();
    const int next = l.temp(n.name + "/backward", ops::TensorDesc{cs, l.t(x).desc.dtype});
    gather_rows(l, n, cur, outer * dim, index_tensor(l, n, rows), next);
    cur = next;
  }
  l.view(n, n.outputs[0], cur);
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
  // Zero-size parts are empty outputs: nothing to write, and the split op takes positive sizes.
  std::vector<std::int64_t> kept;
  std::vector<int> kept_outs;
  for (std::size_t k = 0; k < sizes.size(); ++k)
    if (sizes[k] != 0) {
      kept.push_back(sizes[k]);
      kept_outs.push_back(outs[k]);
    }
  l.step(n, "split", ops::SplitCall{axis, kept}, {x}, kept_outs);
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

int permuted(Lowerer& l, const Node& n, int x, const std::vector<std::size_t>& p, int o);

// A gather step: rows of `data` seen as [rows, inner] picked by `idx` (int32 on the device), into output o.
void gather_rows(Lowerer& l, const Node& n, int data, std::uint64_t rows, int idx, int o) {
  const ops::Shape ds = l.t(data).desc.shape;
  l.step(n, "gather", ops::Operands{}, {data, idx}, {o});
  l.program().steps.back().shapes = {ops::Shape{rows, ops::elements(ds) / rows}, l.t(idx).desc.shape};
}

// A constant int32 index tensor of the lowering.
int index_tensor(Lowerer& l, const Node& n, const std::vector<std::int64_t>& rows) {
  const int t = l.temp(n.name + "/rows", ops::TensorDesc{ops::Shape{rows.size()}, hw::isa::DType::kInt32});
  auto& bytes = l.t(t).constant;
  bytes.resize(rows.size() * 4);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] > INT32_MAX)
      l.fail(n, "row " + std::to_string(rows[i]) + " of the data is past the int32 indices the gather kernel takes");
    const auto v = static_cast<std::int32_t>(rows[i]);
    std::memcpy(&bytes[i * 4], &v, 4);
  }
  return t;
}

// Gather on axis 0: the `gather` op with the indices as they are (from an input: an embedding lookup). On another
// axis: with constant indices, the data is seen as [outer x dim, inner] rows and the row of each (outer, index) pair
// is gathered, one kernel; with indices from an input, the axis is moved to the front (transpose), gathered on axis
// 0 (where the kernel checks every index), and the result's dims put back in ONNX's order (transpose).
void lower_gather(Lowerer& l, const Node& n) {
  const int data = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape ds = l.t(data).desc.shape;
  const std::int64_t axis = l.axis_in(n, n.attr_int("axis", 0), l.graph().value(n.inputs[0]).shape->size());
  const auto dim = static_cast<std::int64_t>(ds.at(static_cast<std::size_t>(axis)));
  const Value& iv = l.graph().value(n.inputs.at(1));
  if (iv.constant)
    for (std::int64_t i : iv.constant->as_ints())
      if (i < -dim || i >= dim)
        l.fail(n, "index " + std::to_string(i) + " is outside [-" + std::to_string(dim) + ", " + std::to_string(dim) +
                      ") on axis " + std::to_string(axis));
  if (axis == 0) {
    gather_rows(l, n, data, ds[0], l.in(n, 1), o);
    return;
  }
  if (!iv.constant) {
    const std::size_t r = ds.size(), ax = static_cast<std::size_t>(axis);
    std::vector<std::size_t> front{ax};
    for (std::size_t d = 0; d < r; ++d)
      if (d != ax) front.push_back(d);
    const int idx = l.in(n, 1);
    const int xt = permuted(l, n, data, front, -1);
    const ops::Shape is = l.t(idx).desc.shape;
    ops::Shape gs = is;  // [indices..., data dims but the axis...]
    for (std::size_t d = 0; d < r; ++d)
      if (d != ax) gs.push_back(ds[d]);
    const int g = l.temp(n.name + "/gathered", ops::TensorDesc{gs, l.t(data).desc.dtype});
    gather_rows(l, n, xt, ds[ax], idx, g);
    // [indices (k dims), before-axis, after-axis] -> [before-axis, indices, after-axis]
    const std::size_t k = is.size();
    std::vector<std::size_t> back;
    for (std::size_t d = 0; d < ax; ++d) back.push_back(k + d);
    for (std::size_t d = 0; d < k; ++d) back.push_back(d);
    for (std::size_t d = k + ax; d < gs.size(); ++d) back.push_back(d);
    const int res = permuted(l, n, g, back, -1);
    l.view(n, n.outputs[0], res);
    return;
  }
  std::uint64_t outer = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= ds[static_cast<std::size_t>(d)];
  std::vector<std::int64_t> rows;
  for (std::uint64_t k = 0; k < outer; ++k)
    for (std::int64_t i : iv.constant->as_ints())
      rows.push_back(static_cast<std::int64_t>(k) * dim + (i < 0 ? i + dim : i));
  gather_rows(l, n, data, outer * static_cast<std::uint64_t>(dim), index_tensor(l, n, rows), o);
}

// An int32 constant of `shape` with element k = f(k), for index arithmetic on the device (the callers keep the
// values below 2^24: the fused_elementwise expressions they meet compute in fp32).
int index_constant(Lowerer& l, const Node& n, const std::string& name, const ops::Shape& shape,
                   const std::function<std::int64_t(std::uint64_t)>& f) {
  const int t = l.temp(n.name + "/" + name, ops::TensorDesc{shape, hw::isa::DType::kInt32});
  auto& bytes = l.t(t).constant;
  bytes.resize(ops::elements(shape) * 4);
  for (std::uint64_t k = 0; k < ops::elements(shape); ++k) {
    const auto v = static_cast<std::int32_t>(f(k));
    std::memcpy(&bytes[k * 4], &v, 4);
  }
  return t;
}

// GatherElements with indices from an input: each output element's flat position in the data, computed on the
// device as one expression (the index, made non-negative, times the axis' stride, plus a constant for the
// element's other coordinates), picks a one-element row of the data seen as [elements, 1] with the gather op.
void lower_gather_elements(Lowerer& l, const Node& n) {
  const int data = l.in(n, 0), idx = l.in(n, 1);
  const ops::Shape ds = l.t(data).desc.shape, is = l.t(idx).desc.shape;
  if (ds.size() != is.size()) l.fail(n, "the indices' rank differs from the data's");
  const auto axis = static_cast<std::size_t>(l.axis_in(n, n.attr_int("axis", 0), ds.size()));
  for (std::size_t d = 0; d < ds.size(); ++d)
    if (d != axis && is[d] > ds[d])
      l.fail(n, "the indices' dim " + std::to_string(d) + " (" + std::to_string(is[d]) + ") exceeds the data's (" +
                    std::to_string(ds[d]) + ")");
  const std::uint64_t total = ops::elements(ds), count = ops::elements(is);
  if (total >= (1U << 24)) l.fail(n, "the data has " + std::to_string(total) + " elements, at most 2^24 are indexed");
  std::vector<std::uint64_t> dstride(ds.size(), 1), istride(is.size(), 1);
  for (std::size_t d = ds.size(); d-- > 1;) {
    dstride[d - 1] = dstride[d] * ds[d];
    istride[d - 1] = istride[d] * is[d];
  }
  const int base = index_constant(l, n, "base", is, [&](std::uint64_t k) {
    std::int64_t b = 0;
    for (std::size_t d = 0; d < is.size(); ++d)
      if (d != axis) b += static_cast<std::int64_t>((k / istride[d]) % is[d] * dstride[d]);
    return b;
  });
  const int flat = l.temp(n.name + "/flat", ops::TensorDesc{ops::Shape{count}, hw::isa::DType::kInt32});
  // An index outside [-dim, dim) becomes position `total`, which the gather kernel refuses (naming it), rather than
  // a position in another row.
  const std::string dim = std::to_string(ds[axis]), stride = std::to_string(dstride[axis]);
  std::string expr = "where(or(lt(x0,-" + dim + "),ge(x0," + dim + ")),";
  expr.append(std::to_string(total)).append(",add(mul(where(lt(x0,0),add(x0,").append(dim).append("),x0),");
  expr.append(stride).append("),x1))");
  l.step(n, "fused_elementwise", ops::FusedElementwiseCall{expr, is, hw::isa::DType::kInt32}, {idx, base}, {flat});
  const int picked = l.temp(n.name + "/picked", ops::TensorDesc{ops::Shape{count, 1}, l.t(data).desc.dtype});
  gather_rows(l, n, data, total, flat, picked);
  l.view(n, n.outputs[0], picked);
}

// GatherND with indices from an input (any batch_dims b): the row of each index tuple in the data seen as
// [rows, inner] (rows: the batch dims and the K indexed dims; inner: the rest) computed on the device: the tuple's
// entries made non-negative and times their strides (one expression), summed over K (reduce_sum), plus the batch
// offset (a constant), as int32; then the gather op.
void lower_gather_nd_input(Lowerer& l, const Node& n) {
  const int data = l.in(n, 0), idx = l.in(n, 1), o = l.out(n, 0);
  const ops::Shape ds = l.t(data).desc.shape, is = l.t(idx).desc.shape;
  const auto b = static_cast<std::size_t>(n.attr_int("batch_dims", 0));
  const std::size_t k = is.back();
  if (b >= is.size() || k == 0 || b + k > ds.size())
    l.fail(n, "the indices' last dim " + std::to_string(k) + " and batch_dims " + std::to_string(b) +
                  " do not fit the data's rank");
  for (std::size_t d = 0; d < b; ++d)
    if (is[d] != ds[d]) l.fail(n, "batch dim " + std::to_string(d) + " of the indices differs from the data's");
  std::uint64_t rows = 1, per_batch = 1;
  for (std::size_t d = 0; d < b + k; ++d) rows *= ds[d];
  for (std::size_t d = b; d < b + k; ++d) per_batch *= ds[d];
  if (rows >= (1U << 24)) l.fail(n, "the data has " + std::to_string(rows) + " rows, at most 2^24 are indexed");
  const ops::Shape tuples(is.begin(), is.end() - 1);
  const std::uint64_t count = ops::elements(tuples);
  const ops::Shape fp32_shape = tuples.empty() ? ops::Shape{1} : tuples;
  // Each entry's dim and stride, laid out as the indices are (a [k] row would repeat every k elements, and the
  // expression kernel cuts its tiles at each repetition).
  const int dims = index_constant(l, n, "dims", is, [&](std::uint64_t e) { return ds[b + e % k]; });
  const int strides = index_constant(l, n, "strides", is, [&](std::uint64_t e) {
    std::int64_t st = 1;
    for (std::size_t d = b + e % k + 1; d < b + k; ++d) st *= static_cast<std::int64_t>(ds[d]);
    return st;
  });
  // An entry outside [-dim, dim) becomes `rows`, so the tuple's row is past the data and the gather kernel refuses it.
  const int terms = l.temp(n.name + "/terms", ops::TensorDesc{is, hw::isa::DType::kFp32});
  l.step(n, "fused_elementwise",
         ops::FusedElementwiseCall{
             "where(or(lt(x0,neg(x1)),ge(x0,x1))," + std::to_string(rows) + ",mul(where(lt(x0,0),add(x0,x1),x0),x2))",
             is, hw::isa::DType::kFp32},
         {idx, dims, strides}, {terms});
  int sum = terms;
  if (k > 1) {
    sum = l.temp(n.name + "/sum", ops::TensorDesc{fp32_shape, hw::isa::DType::kFp32});
    l.step(n, "reduce_sum", ops::ReduceCall{-1}, {terms}, {sum});
  }
  // The batch offset of tuple t: its first b coordinates' flat position times the rows a batch spans.
  std::uint64_t inner_tuples = 1;
  for (std::size_t d = b; d + 1 < is.size(); ++d) inner_tuples *= is[d];
  const int offset = index_constant(l, n, "batch_offset", ops::Shape{count}, [&](std::uint64_t t) {
    return static_cast<std::int64_t>(t / inner_tuples * per_batch);
  });
  const int flat = l.temp(n.name + "/rows", ops::TensorDesc{ops::Shape{count}, hw::isa::DType::kInt32});
  const int sum_flat = l.reshaped(sum, ops::Shape{count}, n.name + "/sum_flat");
  l.step(n, "fused_elementwise", ops::FusedElementwiseCall{"add(x0,x1)", ops::Shape{count}, hw::isa::DType::kInt32},
         {sum_flat, offset}, {flat});
  gather_rows(l, n, data, rows, flat, o);
}

// GatherND (batch_dims 0) with constant indices [..., k]: each index names a row of data seen as
// [d0 x ... x d(k-1), inner]; one gather of those rows. Otherwise lower_gather_nd_input.
void lower_gather_nd(Lowerer& l, const Node& n) {
  const Value& iv = l.graph().value(n.inputs.at(1));
  if (!iv.constant || n.attr_int("batch_dims", 0) != 0) {
    lower_gather_nd_input(l, n);
    return;
  }
  const int data = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape ds = l.t(data).desc.shape;
  const std::vector<std::int64_t> idx = iv.constant->as_ints();
  const auto k = static_cast<std::size_t>(iv.constant->shape.empty() ? 1 : iv.constant->shape.back());
  if (k == 0 || k > ds.size()) l.fail(n, "the indices' last dim " + std::to_string(k) + " is outside the data's rank");
  std::uint64_t rows = 1;
  for (std::size_t d = 0; d < k; ++d) rows *= ds[d];
  std::vector<std::int64_t> picked;
  for (std::size_t at = 0; at + k <= idx.size(); at += k) {
    std::int64_t r = 0;
    for (std::size_t d = 0; d < k; ++d) {
      const auto dim = static_cast<std::int64_t>(ds[d]);
      const std::int64_t i = idx[at + d];
      if (i < -dim || i >= dim) l.fail(n, "index " + std::to_string(i) + " is outside dim " + std::to_string(d));
      r = r * dim + (i < 0 ? i + dim : i);
    }
    picked.push_back(r);
  }
  gather_rows(l, n, data, rows, index_tensor(l, n, picked), o);
}

std::vector<HostArray> fold_gather_nd(const FoldArgs& a) {
  const HostArray &x = a.need(0), &idx = a.need(1);
  if (a.node.attr_int("batch_dims", 0) != 0 || idx.shape.empty()) throw NoFold{};
  const auto k = static_cast<std::size_t>(idx.shape.back());
  if (k == 0 || k > x.shape.size()) throw NoFold{};
  std::vector<std::int64_t> shape(idx.shape.begin(), idx.shape.end() - 1);
  std::int64_t inner = 1;
  for (std::size_t d = k; d < x.shape.size(); ++d) {
    shape.push_back(x.shape[d]);
    inner *= x.shape[d];
  }
  return {gather_elems(x, shape, [&](std::int64_t e) {
    const std::int64_t j = e / inner;
    std::int64_t r = 0;
    for (std::size_t d = 0; d < k; ++d) {
      std::int64_t i = idx.i.at(static_cast<std::size_t>(j) * k + d);
      if (i < 0) i += x.shape[d];
      if (i < 0 || i >= x.shape[d]) throw NoFold{};
      r = r * x.shape[d] + i;
    }
    return r * inner + e % inner;
  })};
}

// GatherElements: out[...j_axis...] = x[...idx[...]...], the indices' shape (host only).
std::vector<HostArray> fold_gather_elements(const FoldArgs& a) {
  const HostArray &x = a.need(0), &idx = a.need(1);
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  if (static_cast<std::int64_t>(idx.shape.size()) != rank) throw NoFold{};
  const auto axis = static_cast<std::size_t>(norm_axis(a.node.attr_int("axis", 0), rank));
  for (std::size_t d = 0; d < idx.shape.size(); ++d)
    if (d != axis && idx.shape[d] > x.shape[d]) throw NoFold{};  // ONNX requires the indices within the data
  const auto xs = strides_of(x.shape), is = strides_of(idx.shape);
  return {gather_elems(x, idx.shape, [&](std::int64_t k) {
    std::int64_t src = 0;
    for (std::size_t d = 0; d < idx.shape.size(); ++d) {
      std::int64_t c = (k / is[d]) % idx.shape[d];
      if (d == axis) {
        c = idx.i.at(static_cast<std::size_t>(k));
        if (c < 0) c += x.shape[d];
        if (c < 0 || c >= x.shape[d]) throw NoFold{};
      }
      src += c * xs[d];
    }
    return src;
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

// Tensor x permuted by p into `o` (a new temporary when o < 0), as transpose steps the op takes (the last dim stays
// last, or the last two swap): at most three,
//   keep-last: [others, p[r-1], r-1] -> swap the last two -> keep-last: p,
// with `others` the remaining dims in p's order; steps that would not move anything are left out. Returns the result.
int permuted(Lowerer& l, const Node& n, int x, const std::vector<std::size_t>& p, int o) {
  const ops::Shape s = l.t(x).desc.shape;
  const std::size_t r = s.size();
  if (o < 0) {
    ops::Shape shape;
    for (std::size_t d : p) shape.push_back(s[d]);
    o = l.temp(n.name + "/permuted" + std::to_string(l.program().steps.size()),
               ops::TensorDesc{shape, l.t(x).desc.dtype});
  }
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
    return at;  // x itself for the identity permutation
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
  return at;
}

void lower_transpose(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const std::size_t r = l.t(x).desc.shape.size();
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
  if (permuted(l, n, x, p, o) == x) l.view(n, n.outputs[0], x);  // the identity permutation
}

}  // namespace

void add_data_movement(std::vector<OpInfo>& table) {
  table.push_back(OpInfo::onnx("Slice", 3, 5)
                      .needs_values_of({1, 2, 3, 4})
                      .folds(fold_slice)
                      .lowers(lower_slice,
                              "`slice` (a strided copy job); an axis with a negative step then by a `gather` of its "
                              "rows in reverse"));
  table.push_back(
      OpInfo::onnx("Concat", 1, kVariadic).reads({"axis"}).folds(fold_concat).lowers(lower_concat, "`concat`"));
  table.push_back(OpInfo::onnx("Split", 1, 2)
                      .reads({"axis", "split"})
                      .needs_values_of({1})
                      .lowers(lower_split, "`split` (sizes from the input, the attribute or the outputs' shapes)"));
  table.push_back(OpInfo::onnx("Gather", 2, 2)
                      .reads({"axis"})
                      .folds(fold_gather)
                      .lowers(lower_gather,
                              "`gather` of rows: on axis 0 with any indices (an embedding lookup); on another axis "
                              "with constant indices the data seen as [outer x dim, inner] rows, with indices from an "
                              "input the axis moved to the front and back by `transpose`"));
  table.push_back(OpInfo::onnx("GatherND", 2, 2)
                      .reads({"batch_dims"})
                      .folds(fold_gather_nd)
                      .lowers(lower_gather_nd,
                              "`gather` of the rows constant indices name (batch_dims 0); indices from an input or "
                              "batch_dims > 0: the rows computed on the device (`fused_elementwise`, `reduce_sum`)"));
  table.push_back(OpInfo::onnx("GatherElements", 2, 2)
                      .reads({"axis"})
                      .folds(fold_gather_elements)
                      .lowers(lower_gather_elements,
                              "`gather` of one-element rows at flat positions one `fused_elementwise` expression "
                              "computes from the indices"));
  table.push_back(
      OpInfo::onnx("Expand", 2, 2).needs_values_of({1}).folds(fold_expand).lowers(lower_expand, "`expand`"));
  table.push_back(OpInfo::onnx("Transpose", 1, 1)
                      .reads({"perm"})
                      .folds(fold_transpose)
                      .lowers(lower_transpose,
                              "`transpose`: any permutation as up to three steps the op takes (keep-last, "
                              "swap-last-two, keep-last)"));
}

}  // namespace npusim::stack::graph::onnx_ops
