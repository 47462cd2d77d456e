// Data-movement ops: Slice, Concat, Split and Expand. Each call becomes a list of copy jobs, one per
// (input, output) pair: an N-D strided region of the source (stride 0 along an expanded dim) to an N-D strided
// region of the destination. A job's innermost dim is a run contiguous on both sides; the next dim out is moved as
// the bursts of one padded copy (a source gap and a destination gap per burst), so a slice of rows is one copy per
// tile. The jobs' tiles are dealt over the vector cores, and each core moves them GM -> UB -> GM through two
// stage buffers: MTE2 fills one while MTE3 drains the other.
#include <algorithm>
#include <numeric>
#include <optional>
#include <sstream>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

struct CopyDim {
  std::uint64_t size = 1;
  std::uint64_t src = 0, dst = 0;  // strides in elements (src 0: broadcast)
};

struct CopyJob {
  std::size_t src_buf = 0, dst_buf = 0;  // indices into the kernel's buffers (inputs, then outputs)
  std::uint64_t src_off = 0, dst_off = 0;
  std::uint64_t run = 1;          // contiguous elements on both sides
  std::vector<CopyDim> outer;     // outermost first
  bool rows = false;              // the last outer dim goes as the bursts of one copy
  std::uint64_t per_tile = 1;     // rows per tile (rows), or run elements per tile (a run larger than a tile)
  std::uint64_t units = 0;        // tiles of this job
};

struct CopyArgs {
  std::vector<CopyJob> jobs;
  std::vector<GM_ADDR> buf;
  std::uint64_t stage_bytes = 0;
};

// An expand of the innermost dim: each source value becomes a row of `len` copies (a [..., N, 1] tensor to
// [..., N, L], a scalar to a whole tensor). Copy jobs would move one element per burst; instead a tile's values come
// in with one copy, the scalar unit reads each and `Duplicate` fills its row in the UB, and the rows go out with one
// copy. Rows are groups x rows: a group's rows read consecutive source values and write consecutive rows; groups
// (the outer dims) sit at the offsets of `outer`.
struct SplatArgs {
  GM_ADDR src = 0, dst = 0;
  std::vector<CopyDim> outer;          // outermost first (the group dims)
  std::uint64_t rows = 1, len = 1;     // rows per group, elements per row
  std::uint64_t per_tile = 1;          // rows per tile, or elements per piece of a row longer than a stage
  bool pieces = false;                 // a row spans several tiles
  std::uint64_t units = 0, stage_bytes = 0;
};

// Normalises a job: drops size-1 dims, merges dims that are contiguous on both sides, takes the innermost dim as
// the run when it is contiguous on both sides, and sizes the tiles for `stage_bytes`.
CopyJob make_job(std::vector<CopyDim> dims, std::size_t src_buf, std::size_t dst_buf, std::uint64_t src_off,
                 std::uint64_t dst_off, std::uint64_t es, std::uint64_t stage_bytes) {
  CopyJob j;
  j.src_buf = src_buf;
  j.dst_buf = dst_buf;
  j.src_off = src_off;
  j.dst_off = dst_off;
  dims.erase(std::remove_if(dims.begin(), dims.end(), [](const CopyDim& d) { return d.size == 1; }), dims.end());
  std::vector<CopyDim> merged;
  for (const CopyDim& d : dims) {
    if (!merged.empty()) {
      CopyDim& o = merged.back();
      if (o.src == d.src * d.size && o.dst == d.dst * d.size) {  // o is d's outer continuation on both sides
        o = CopyDim{o.size * d.size, d.src, d.dst};
        continue;
      }
    }
    merged.push_back(d);
  }
  if (!merged.empty() && merged.back().src == 1 && merged.back().dst == 1) {
    j.run = merged.back().size;
    merged.pop_back();
  }
  j.outer = merged;
  const std::uint64_t row_bytes = ceil_to(j.run * es, 32);
  std::uint64_t outer_units = 1;
  for (const CopyDim& d : j.outer) outer_units *= d.size;
  if (row_bytes > stage_bytes) {  // a run larger than a tile: tiles along the run
    j.per_tile = stage_bytes / es / 16 * 16;
    j.units = outer_units * ceil_div(j.run, j.per_tile);
    return j;
  }
  // Bursts along the last outer dim when the gaps are non-negative (not a broadcast dim).
  if (!j.outer.empty() && j.outer.back().src >= j.run && j.outer.back().dst >= j.run) {
    j.rows = true;
    const std::uint64_t rows = j.outer.back().size;
    j.per_tile = std::min<std::uint64_t>({stage_bytes / row_bytes, rows, 4095});
    j.units = outer_units / rows * ceil_div(rows, j.per_tile);
  } else {
    j.units = outer_units;
  }
  return j;
}

// Element offsets of the index `idx` over dims[0, n) (outermost first), added to *src and *dst.
void add_offsets(const std::vector<CopyDim>& dims, std::uint64_t idx, std::size_t n, std::uint64_t* src, std::uint64_t* dst) {
  for (std::size_t k = n; k-- > 0;) {
    const std::uint64_t i = idx % dims[k].size;
    idx /= dims[k].size;
    *src += i * dims[k].src;
    *dst += i * dims[k].dst;
  }
}

template <class T>
void copy_kernel(const CopyArgs& a) {
  const std::uint64_t es = sizeof(T);
  TPipe pipe;
  TBuf<TPosition::VECIN> stage[2];
  for (auto& s : stage) pipe.InitBuffer(s, a.stage_bytes);
  const std::uint32_t moved[2] = {pipe.AllocEventID(PIPE_MTE2, PIPE_MTE3), pipe.AllocEventID(PIPE_MTE2, PIPE_MTE3)};
  const std::uint32_t freed[2] = {pipe.AllocEventID(PIPE_MTE3, PIPE_MTE2), pipe.AllocEventID(PIPE_MTE3, PIPE_MTE2)};
  std::uint64_t total = 0;
  for (const CopyJob& j : a.jobs) total += j.units;
  std::uint64_t step = 0;  // tiles this core moved: buffer step % 2
  for (std::uint64_t u = GetBlockIdx(); u < total; u += GetBlockNum(), ++step) {
    std::uint64_t local = u;
    std::size_t ji = 0;
    while (local >= a.jobs[ji].units) local -= a.jobs[ji++].units;
    const CopyJob& j = a.jobs[ji];
    const std::size_t b = step % 2;
    if (step >= 2) wait_flag(PIPE_MTE3, PIPE_MTE2, freed[b]);
    const LocalTensor<T> buf = stage[b].Get<T>();
    const GM_ADDR src = a.buf[j.src_buf], dst = a.buf[j.dst_buf];
    std::uint64_t so = j.src_off, d0 = j.dst_off, nr = 1, len = j.run, ss = 0, ds = 0;
    if (j.rows) {  // tile = per_tile rows of the last outer dim
      const CopyDim& r = j.outer.back();
      const std::uint64_t chunks = ceil_div(r.size, j.per_tile), r0 = (local % chunks) * j.per_tile;
      add_offsets(j.outer, local / chunks, j.outer.size() - 1, &so, &d0);
      so += r0 * r.src;
      d0 += r0 * r.dst;
      nr = std::min(j.per_tile, r.size - r0);
      ss = r.src;
      ds = r.dst;
    } else if (j.run * es > a.stage_bytes) {  // tile = a piece of one run
      const std::uint64_t chunks = ceil_div(j.run, j.per_tile), c0 = (local % chunks) * j.per_tile;
      add_offsets(j.outer, local / chunks, j.outer.size(), &so, &d0);
      so += c0;
      d0 += c0;
      len = std::min(j.per_tile, j.run - c0);
    } else {
      add_offsets(j.outer, local, j.outer.size(), &so, &d0);
    }
    copy_rows_in(buf, src + so * es, nr, len, nr > 1 ? ss : len);
    set_flag(PIPE_MTE2, PIPE_MTE3, moved[b]);
    wait_flag(PIPE_MTE2, PIPE_MTE3, moved[b]);
    copy_rows_out(dst + d0 * es, buf, nr, len, nr > 1 ? ds : len);
    set_flag(PIPE_MTE3, PIPE_MTE2, freed[b]);
  }
  for (std::uint64_t s = step >= 2 ? step - 2 : 0; s < step; ++s) wait_flag(PIPE_MTE3, PIPE_MTE2, freed[s % 2]);
}

template <class T>
void splat_kernel(const SplatArgs& a) {
  const std::uint64_t es = sizeof(T), lp = ub_row<T>(a.len);
  TPipe pipe;
  TBuf<TPosition::VECIN> vals;
  TBuf<TPosition::VECOUT> stage[2];
  pipe.InitBuffer(vals, ceil_to((a.pieces ? 1 : a.per_tile) * es, 32));
  for (auto& b : stage) pipe.InitBuffer(b, a.stage_bytes);
  const std::uint32_t loaded = pipe.AllocEventID(PIPE_MTE2, PIPE_S);
  const std::uint32_t filled[2] = {pipe.AllocEventID(PIPE_V, PIPE_MTE3), pipe.AllocEventID(PIPE_V, PIPE_MTE3)};
  const std::uint32_t freed[2] = {pipe.AllocEventID(PIPE_MTE3, PIPE_V), pipe.AllocEventID(PIPE_MTE3, PIPE_V)};
  const std::uint64_t chunks = a.pieces ? ceil_div(a.len, a.per_tile) : ceil_div(a.rows, a.per_tile);
  std::uint64_t step = 0;
  for (std::uint64_t u = GetBlockIdx(); u < a.units; u += GetBlockNum(), ++step) {
    // The tile: group u / chunks, and rows [r0, r0 + nr) of it or piece [c0, c0 + w) of its one row.
    std::uint64_t so = 0, d0 = 0;
    const std::uint64_t c = u % chunks;
    add_offsets(a.outer, u / chunks, a.outer.size(), &so, &d0);
    std::uint64_t nr = 1, w = a.len;
    if (a.pieces) {
      d0 += c * a.per_tile;
      w = std::min(a.per_tile, a.len - c * a.per_tile);
    } else {
      so += c * a.per_tile;
      d0 += c * a.per_tile * a.len;
      nr = std::min(a.per_tile, a.rows - c * a.per_tile);
    }
    const std::size_t b = step % 2;
    const LocalTensor<T> v = vals.Get<T>(), out = stage[b].Get<T>();
    copy_in(v, a.src + so * es, nr);
    set_flag(PIPE_MTE2, PIPE_S, loaded);
    wait_flag(PIPE_MTE2, PIPE_S, loaded);
    if (step >= 2) wait_flag(PIPE_MTE3, PIPE_V, freed[b]);
    for (std::uint64_t r = 0; r < nr; ++r) {
      const T x = v.GetValue(r);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>)
        Duplicate(out[r * lp], x, w);
      else Duplicate(out[r * lp], hw::isa::to_float(x), w);  // exact: every fp16/bf16 value is a float
    }
    set_flag(PIPE_V, PIPE_MTE3, filled[b]);
    wait_flag(PIPE_V, PIPE_MTE3, filled[b]);
    copy_rows_out(a.dst + d0 * es, out, nr, w, nr > 1 ? a.len : w, lp);
    set_flag(PIPE_MTE3, PIPE_V, freed[b]);
  }
  for (std::uint64_t s = step >= 2 ? step - 2 : 0; s < step; ++s) wait_flag(PIPE_MTE3, PIPE_V, freed[s % 2]);
}

// The splat form of a copy job (see SplatArgs) when its innermost dim repeats one value at least a block long and
// the dim outside it reads consecutive values into consecutive rows; nothing otherwise.
std::optional<SplatArgs> splat_of(const CopyJob& j, std::uint64_t es, std::uint64_t stage_bytes) {
  if (j.src_off || j.dst_off || j.run != 1 || j.outer.empty()) return std::nullopt;
  if (j.outer.back().src != 0 || j.outer.back().dst != 1 || j.outer.back().size * es < 32) return std::nullopt;
  SplatArgs a;
  a.len = j.outer.back().size;
  a.outer.assign(j.outer.begin(), j.outer.end() - 1);
  a.pieces = ceil_to(a.len * es, 32) > stage_bytes;  // a row longer than a stage: tiles are pieces of one row
  if (!a.pieces && !a.outer.empty() && a.outer.back().src == 1 && a.outer.back().dst == a.len) {
    a.rows = a.outer.back().size;
    a.outer.pop_back();
  }
  std::uint64_t groups = 1;
  for (const CopyDim& d : a.outer) groups *= d.size;
  a.stage_bytes = stage_bytes;
  if (a.pieces) {
    a.per_tile = stage_bytes / es / 16 * 16;
    a.units = groups * ceil_div(a.len, a.per_tile);
  } else {
    // The values buffer beside the two stages stays within the UB's 1 KiB the stages leave: at most 512 B.
    a.per_tile = std::min<std::uint64_t>({stage_bytes / ceil_to(a.len * es, 32), a.rows, 512 / es});
    a.units = groups * ceil_div(a.rows, a.per_tile);
  }
  return a;
}

// Row-major strides of a shape, in elements.
std::vector<std::uint64_t> strides_of(const Shape& s) {
  std::vector<std::uint64_t> st(s.size(), 1);
  for (std::size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

std::vector<std::int64_t> parse_ints(const std::string& op, const std::string& key, const std::string& text) {
  std::vector<std::int64_t> out;
  const auto not_an_integer = [&](const std::string& part) {
    return InputError(op + ": " + key + "='" + text + "': '" + part + "' is not an integer");
  };
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    std::size_t pos = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != part.size()) throw not_an_integer(part);
    out.push_back(v);
  }
  return out;
}

std::vector<std::int64_t> ints_param(const Params& p, const std::string& op, const std::string& key) {
  const auto it = p.find(key);
  return it == p.end() ? std::vector<std::int64_t>{} : parse_ints(op, key, it->second);
}

std::int64_t int_param(const Params& p, const std::string& op, const std::string& key, std::int64_t def) {
  const auto v = ints_param(p, op, key);
  if (v.size() > 1) throw InputError(op + ": " + key + " must be one integer");
  return v.empty() ? def : v[0];
}

std::size_t axis_in(std::int64_t axis, const std::string& op, std::size_t rank) {
  const std::int64_t r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)
    throw InputError(op + ": axis must be one integer in " + std::to_string(-r) + ".." + std::to_string(r - 1));
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

// A list of shapes: "4x8,4x16".
std::vector<Shape> shapes_param(const Params& p, const std::string& op) {
  const auto it = p.find("shapes");
  if (it == p.end()) throw InputError(op + ": parameter 'shapes' is required, e.g. -p shapes=4x8,4x16");
  std::vector<Shape> out;
  std::stringstream ss(it->second);
  for (std::string part; std::getline(ss, part, ',');) out.push_back(parse_shape(part));
  if (out.empty()) throw InputError(op + ": 'shapes' lists no shape");
  return out;
}

// The call's jobs and output shapes.
struct CopyJobs {
  std::vector<Shape> outputs;
  std::vector<std::vector<CopyDim>> dims;  // per job
  std::vector<std::size_t> src, dst;
  std::vector<std::uint64_t> src_off, dst_off;
  void add(std::vector<CopyDim> d, std::size_t s, std::size_t t, std::uint64_t so, std::uint64_t to) {
    dims.push_back(std::move(d));
    src.push_back(s);
    dst.push_back(t);
    src_off.push_back(so);
    dst_off.push_back(to);
  }
};

// Slice: per dim [start, end) with a positive step (-p starts, ends, steps; ONNX clamping of out-of-range bounds).
CopyJobs slice_jobs(const std::vector<TensorDesc>& in, const Call& call) {
  const Shape& s = in[0].shape;
  const SliceCall& sc = call_as<SliceCall>(call, "slice");
  const auto &starts = sc.starts, &ends = sc.ends, &steps = sc.steps;
  if (starts.size() > s.size() || ends.size() != starts.size() || (!steps.empty() && steps.size() != starts.size()))
    throw InputError("slice: starts, ends (and steps) must list the same number of dims, at most the rank " + std::to_string(s.size()));
  const auto st = strides_of(s);
  Shape out = s;
  std::uint64_t src_off = 0;
  std::vector<std::uint64_t> step(s.size(), 1);
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::int64_t dim = static_cast<std::int64_t>(s[k]);
    const std::int64_t stp = steps.empty() ? 1 : steps[k];
    if (stp <= 0) throw InputError("slice: steps must be positive (dim " + std::to_string(k) + " has " + std::to_string(stp) + ")");
    auto clamp = [&](std::int64_t v) { return std::clamp(v < 0 ? v + dim : v, std::int64_t{0}, dim); };
    const std::int64_t b = clamp(starts[k]), e = clamp(ends[k]);
    if (e <= b) throw InputError("slice: dim " + std::to_string(k) + " is empty ([" + std::to_string(starts[k]) + ", " + std::to_string(ends[k]) + "))");
    out[k] = static_cast<std::uint64_t>((e - b + stp - 1) / stp);
    src_off += static_cast<std::uint64_t>(b) * st[k];
    step[k] = static_cast<std::uint64_t>(stp);
  }
  const auto ot = strides_of(out);
  std::vector<CopyDim> dims;
  for (std::size_t k = 0; k < s.size(); ++k) dims.push_back({out[k], st[k] * step[k], ot[k]});
  CopyJobs c;
  c.outputs = {out};
  c.add(dims, 0, 1, src_off, 0);
  return c;
}

CopyJobs concat_jobs(const std::vector<TensorDesc>& in, const Call& call) {
  const std::size_t rank = in[0].shape.size(), axis = axis_in(call_as<ConcatCall>(call, "concat").axis, "concat", rank);
  Shape out = in[0].shape;
  out[axis] = 0;
  for (const TensorDesc& t : in) {
    if (t.shape.size() != rank) throw InputError("concat: the inputs differ in rank");
    for (std::size_t k = 0; k < rank; ++k)
      if (k != axis && t.shape[k] != in[0].shape[k])
        throw InputError("concat: " + shape_string(t.shape) + " and " + shape_string(in[0].shape) + " differ outside axis " + std::to_string(axis));
    out[axis] += t.shape[axis];
  }
  const auto ot = strides_of(out);
  CopyJobs c;
  c.outputs = {out};
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto st = strides_of(in[i].shape);
    std::vector<CopyDim> dims;
    for (std::size_t k = 0; k < rank; ++k) dims.push_back({in[i].shape[k], st[k], ot[k]});
    c.add(dims, i, in.size(), 0, at * ot[axis]);
    at += in[i].shape[axis];
  }
  return c;
}

CopyJobs split_jobs(const std::vector<TensorDesc>& in, const Call& call) {
  const Shape& s = in[0].shape;
  const SplitCall& sc = call_as<SplitCall>(call, "split");
  const std::size_t axis = axis_in(sc.axis, "split", s.size());
  const auto& sizes = sc.sizes;
  if (sizes.empty()) throw InputError("split: no sizes given");
  std::int64_t sum = 0;
  for (auto v : sizes) {
    if (v <= 0) throw InputError("split: sizes must be positive");
    sum += v;
  }
  if (static_cast<std::uint64_t>(sum) != s[axis])
    throw InputError("split: sizes add up to " + std::to_string(sum) + ", dim " + std::to_string(axis) + " is " + std::to_string(s[axis]));
  const auto st = strides_of(s);
  CopyJobs c;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Shape out = s;
    out[axis] = static_cast<std::uint64_t>(sizes[i]);
    const auto ot = strides_of(out);
    std::vector<CopyDim> dims;
    for (std::size_t k = 0; k < s.size(); ++k) dims.push_back({out[k], st[k], ot[k]});
    c.outputs.push_back(out);
    c.add(dims, 0, 1 + i, at * st[axis], 0);
    at += out[axis];
  }
  return c;
}

// Expand: numpy broadcasting of the input to -p to=... (dims of size 1 repeat; missing leading dims are added).
CopyJobs expand_jobs(const std::vector<TensorDesc>& in, const Call& call) {
  const Shape& to = call_as<ExpandCall>(call, "expand").to;
  check_shape(to, "expand: the target shape");
  Shape s = in[0].shape;
  if (s.size() > to.size()) throw InputError("expand: " + shape_string(s) + " has more dims than " + shape_string(to));
  s.insert(s.begin(), to.size() - s.size(), 1);
  const auto st = strides_of(s), ot = strides_of(to);
  std::vector<CopyDim> dims;
  for (std::size_t k = 0; k < to.size(); ++k) {
    if (s[k] != to[k] && s[k] != 1)
      throw InputError("expand: " + shape_string(in[0].shape) + " does not broadcast to " + shape_string(to));
    dims.push_back({to[k], s[k] == 1 ? 0 : st[k], ot[k]});
  }
  CopyJobs c;
  c.outputs = {to};
  c.add(dims, 0, 1, 0, 0);
  return c;
}

// The text forms (-p starts=... ends=..., axis=, sizes=, to=).
Call parse_slice(const Params& p) {
  SliceCall c;
  c.starts = ints_param(p, "slice", "starts");
  c.ends = ints_param(p, "slice", "ends");
  c.steps = ints_param(p, "slice", "steps");
  return c;
}
Call parse_concat(const Params& p) { return ConcatCall{int_param(p, "concat", "axis", 0)}; }
Call parse_split(const Params& p) {
  SplitCall c;
  c.axis = int_param(p, "split", "axis", 0);
  c.sizes = ints_param(p, "split", "sizes");
  if (c.sizes.empty()) throw InputError("split: parameter 'sizes' is required, e.g. -p sizes=256,256,512");
  return c;
}
Call parse_expand(const Params& p) {
  const auto it = p.find("to");
  if (it == p.end()) throw InputError("expand: parameter 'to' is required, e.g. -p to=4x8x16");
  return ExpandCall{parse_shape(it->second)};
}

using JobsFn = CopyJobs (*)(const std::vector<TensorDesc>&, const Call&);
using ParseFn = Call (*)(const Params&);

OpDef copy_op(const std::string& name, ParseFn parse, JobsFn call, const std::string& summary,
              std::vector<OpParam> params) {
  OpDef d;
  d.name = name;
  d.takes_integers = true;  // bytes are moved as they are
  d.summary = summary;
  d.params = std::move(params);
  d.parse = parse;
  const bool many = name == "concat";
  d.inputs = [many, name](const Params& p, DType t) {
    std::vector<TensorDesc> in;
    if (many) {
      for (const Shape& s : shapes_param(p, name)) in.push_back({s, t});
    } else {
      in.push_back({param_shape(p), t});
    }
    return in;
  };
  d.plan = [call, name](const std::vector<TensorDesc>& in, const Call& p, const config::ChipConfig& chip) {
    if (in.empty() || (name != "concat" && in.size() != 1))
      throw InputError(name + ": " + (name == "concat" ? "one or more operands" : "one operand") + " expected, " + std::to_string(in.size()) + " given");
    const DType t = in[0].dtype;
    for (const TensorDesc& x : in)
      if (x.dtype != t) throw InputError(name + ": the inputs differ in dtype");
    const CopyJobs c = call(in, p);
    const std::uint64_t es = hw::isa::dtype_bytes(t);
    CopyArgs a;
    a.stage_bytes = std::min<std::uint64_t>((chip.buffers.ub.size - 1024) / 2 / 32 * 32, 64 * 1024);
    std::uint64_t units = 0;
    for (std::size_t i = 0; i < c.dims.size(); ++i) {
      a.jobs.push_back(make_job(c.dims[i], c.src[i], c.dst[i], c.src_off[i], c.dst_off[i], es, a.stage_bytes));
      units += a.jobs.back().units;
    }
    OpPlan plan;
    for (const Shape& s : c.outputs) plan.outputs.push_back({s, t});
    plan.type = KernelType::kVector;
    plan.block_dim = u32(std::max<std::uint64_t>(1, std::min<std::uint64_t>(units, chip.vector_units())));
    plan.tiling = {{"tiles", static_cast<double>(units)}, {"jobs", static_cast<double>(a.jobs.size())},
                   {"stage_bytes", static_cast<double>(a.stage_bytes)}};
    // An expand of the innermost dim fills rows in the UB instead (splat_kernel).
    if (name == "expand" && a.jobs.size() == 1 && es > 1) {  // (int8 rows go as copy jobs)
      if (const auto sp = splat_of(a.jobs[0], es, a.stage_bytes)) {
        plan.block_dim = u32(std::max<std::uint64_t>(1, std::min<std::uint64_t>(sp->units, chip.vector_units())));
        plan.tiling = {{"tiles", static_cast<double>(sp->units)}, {"splat_row", static_cast<double>(sp->len)},
                       {"stage_bytes", static_cast<double>(a.stage_bytes)}};
        plan.kernel = [sp = *sp, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
          SplatArgs g = sp;
          g.src = buf[0];
          g.dst = buf[1];
          switch (t) {
            case DType::kFp16: return [g] { splat_kernel<half>(g); };
            case DType::kBf16: return [g] { splat_kernel<bfloat16_t>(g); };
            case DType::kInt32: return [g] { splat_kernel<std::int32_t>(g); };  // Duplicate's integer path: exact
            default: return [g] { splat_kernel<float>(g); };
          }
        };
        return plan;
      }
    }
    plan.kernel = [a, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      CopyArgs g = a;
      g.buf.assign(buf.begin(), buf.end());
      switch (hw::isa::dtype_bytes(t)) {  // bytes are moved as they are: one type per element size
        case 1: return [g] { copy_kernel<std::int8_t>(g); };
        case 2: return [g] { copy_kernel<half>(g); };
        default: return [g] { copy_kernel<float>(g); };
      }
    };
    return plan;
  };
  d.reference = [call](const std::vector<TensorDesc>& in, const Call& p, const std::vector<HostTensor>& v) {
    const CopyJobs c = call(in, p);
    std::vector<HostTensor> out;
    for (const Shape& s : c.outputs) out.emplace_back(elements(s));
    for (std::size_t i = 0; i < c.dims.size(); ++i) {
      const auto& dims = c.dims[i];
      std::uint64_t n = 1;
      for (const CopyDim& d : dims) n *= d.size;
      HostTensor& o = out[c.dst[i] - in.size()];
      for (std::uint64_t e = 0; e < n; ++e) {
        std::uint64_t idx = e, so = c.src_off[i], to = c.dst_off[i];
        for (std::size_t k = dims.size(); k-- > 0;) {
          so += (idx % dims[k].size) * dims[k].src;
          to += (idx % dims[k].size) * dims[k].dst;
          idx /= dims[k].size;
        }
        o[to] = v[c.src[i]][so];
      }
    }
    return out;
  };
  return d;
}

}  // namespace

std::vector<OpDef> copy_ops() {
  return {copy_op("slice", parse_slice, slice_jobs,
                  "a strided window: per dim [start, end) with a positive step (-p starts=... ends=... steps=...)",
                  {{"shape", kRequired},
                   {"starts", "(none: whole dims)"},
                   {"ends", "(none: whole dims)"},
                   {"steps", "(1 per dim)"}}),
          copy_op("concat", parse_concat, concat_jobs, "joins tensors along an axis (-p shapes=AxB,AxC -p axis=1)",
                  {{"shapes", kRequired}, {"axis", "0"}}),
          copy_op("split", parse_split, split_jobs, "cuts a tensor along an axis into parts (-p sizes=...)",
                  {{"shape", kRequired}, {"axis", "0"}, {"sizes", kRequired}}),
          copy_op("expand", parse_expand, expand_jobs,
                  "numpy broadcast of the input to -p to=... (size-1 and missing leading dims repeat)",
                  {{"shape", kRequired}, {"to", kRequired}})};
}

}  // namespace npusim::stack::ops
