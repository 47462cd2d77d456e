// Transpose / Permute (-p perm=0,2,1,3; default: swap the last two dims). Two kinds of permutation:
// - the last dim stays last: rows move whole, by the DMA alone (strided GM reads of the rows of one output
//   "column" of rows, then contiguous writes);
// - the last two dims swap (the leading ones permuted or not): tr x tc blocks are read into the UB, transposed with
//   a Gather whose byte offsets are built once per core (a row of bases from the scalar unit, then one vector add
//   per column), and written back as tc rows of tr.
// Other permutations are refused with a clear error.
#include <algorithm>
#include <sstream>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

constexpr std::size_t kMaxDims = 8;

struct PermArgs {
  GM_ADDR x = 0, out = 0;
  std::uint32_t dims = 0;
  std::uint64_t out_shape[kMaxDims] = {};
  std::uint64_t src_stride[kMaxDims] = {};  // input stride (elements) of output dim k
  bool swap = false;                        // the last two dims swap
  std::uint64_t tr = 0, tc = 0;             // swap: block of tr input rows x tc input columns
  std::uint64_t rows_per_tile = 0;          // row moves: rows per copy
};

// Input offset (elements) of the output element at the multi-index of output position `flat` over dims [0, n).
std::uint64_t src_offset(const PermArgs& a, std::uint64_t flat, std::uint32_t n) {
  std::uint64_t off = 0;
  for (std::uint32_t k = n; k-- > 0;) {
    off += (flat % a.out_shape[k]) * a.src_stride[k];
    flat /= a.out_shape[k];
  }
  return off;
}

template <class T>
void move_rows(const PermArgs& a) {
  // Output rows (the last dim, len elements) in groups along output dim n-2: one strided read, one write each.
  const std::uint32_t n = a.dims;
  const std::uint64_t len = a.out_shape[n - 1], es = sizeof(T);
  const std::uint64_t along = n >= 2 ? a.out_shape[n - 2] : 1, stride = n >= 2 ? a.src_stride[n - 2] : 0;
  std::uint64_t groups = 1;
  for (std::uint32_t k = 0; k + 2 < n; ++k) groups *= a.out_shape[k];
  const std::uint64_t chunks = ceil_div(along, a.rows_per_tile), units = groups * chunks;
  TPipe pipe;
  TBuf<TPosition::VECIN> stage;  // MTE2 -> UB -> MTE3, handed over with a flag pair
  pipe.InitBuffer(stage, a.rows_per_tile * ub_row<T>(len) * es);
  const std::uint32_t moved = pipe.AllocEventID(PIPE_MTE2, PIPE_MTE3), freed = pipe.AllocEventID(PIPE_MTE3, PIPE_MTE2);
  const LocalTensor<T> buf = stage.Get<T>();
  bool first = true;
  for (std::uint64_t u = GetBlockIdx(); u < units; u += GetBlockNum()) {
    const std::uint64_t g = u / chunks, r0 = (u % chunks) * a.rows_per_tile, nr = std::min(a.rows_per_tile, along - r0);
    const std::uint64_t src = (n >= 2 ? src_offset(a, g, n - 2) : 0) + r0 * stride;
    if (!first) wait_flag(PIPE_MTE3, PIPE_MTE2, freed);
    first = false;
    copy_rows_in(buf, a.x + src * es, nr, len, stride ? stride : len);
    set_flag(PIPE_MTE2, PIPE_MTE3, moved);
    wait_flag(PIPE_MTE2, PIPE_MTE3, moved);
    copy_rows_out(a.out + (g * along + r0) * len * es, buf, nr, len, len);
    set_flag(PIPE_MTE3, PIPE_MTE2, freed);
  }
  if (!first) wait_flag(PIPE_MTE3, PIPE_MTE2, freed);
}

template <class T>
void swap_last(const PermArgs& a) {
  const std::uint32_t n = a.dims;
  const std::uint64_t es = sizeof(T);
  // Output [..., C_out = input cols, R_out = input rows]: out dim n-1 is input dim "rows", n-2 input "cols".
  const std::uint64_t rows = a.out_shape[n - 1], cols = a.out_shape[n - 2];
  const std::uint64_t in_row_stride = a.src_stride[n - 1];  // elements between input rows
  std::uint64_t batches = 1;
  for (std::uint32_t k = 0; k + 2 < n; ++k) batches *= a.out_shape[k];
  const std::uint64_t rb = ceil_div(rows, a.tr), cb = ceil_div(cols, a.tc), units = batches * rb * cb;
  const std::uint64_t in_stride = ub_row<T>(a.tc), out_stride = ub_row<T>(a.tr);
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  TBuf<TPosition::VECCALC> foff, fbase;
  pipe.InitBuffer(qin, 2, a.tr * in_stride * es);
  pipe.InitBuffer(qout, 2, a.tc * out_stride * es);
  pipe.InitBuffer(foff, a.tc * out_stride * 4);
  pipe.InitBuffer(fbase, out_stride * 4);
  // offsets[c][r] = (r in_stride + c) es: bases r in_stride es from the scalar unit, + c es per output row. The
  // pad lanes of each output row (r >= tr) read the block's first row: in bounds, never written out.
  const LocalTensor<std::int32_t> base = fbase.Get<std::int32_t>(), off = foff.Get<std::int32_t>();
  for (std::uint64_t r = 0; r < out_stride; ++r)
    base.SetValue(r, narrow<std::int32_t>(r < a.tr ? r * in_stride * es : 0));
  set_flag(PIPE_S, PIPE_V, 0);
  wait_flag(PIPE_S, PIPE_V, 0);
  for (std::uint64_t c = 0; c < a.tc; ++c) Adds(off[c * out_stride], base, narrow<std::int32_t>(c * es), out_stride);
  for (std::uint64_t u = GetBlockIdx(); u < units; u += GetBlockNum()) {
    const std::uint64_t b = u / (rb * cb), r0 = (u / cb) % rb * a.tr, c0 = u % cb * a.tc;
    const std::uint64_t nr = std::min(a.tr, rows - r0), nc = std::min(a.tc, cols - c0);
    const std::uint64_t src = src_offset(a, b, n - 2) + r0 * in_row_stride + c0;
    LocalTensor<T> in = qin.AllocTensor<T>();
    copy_rows_in(in, a.x + src * es, nr, nc, in_row_stride, in_stride);
    qin.EnQue(in);
    in = qin.DeQue<T>();
    LocalTensor<T> out = qout.AllocTensor<T>();
    Gather(out, in, foff.Get<std::uint32_t>(), nc * out_stride);
    qin.FreeTensor(in);
    qout.EnQue(out);
    out = qout.DeQue<T>();
    copy_rows_out(a.out + ((b * cols + c0) * rows + r0) * es, out, nc, nr, rows, out_stride);
    qout.FreeTensor(out);
  }
}

// -p perm=2,0,1 (absent: swap the last two).
TransposeCall parse_call(const Params& p) {
  TransposeCall c;
  const auto it = p.find("perm");
  if (it == p.end()) return c;
  std::stringstream ss(it->second);
  for (std::string part; std::getline(ss, part, ',');) {
    std::size_t pos = 0;
    unsigned long v = 0;
    try {
      if (!part.empty() && part[0] != '-') v = std::stoul(part, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != part.size() || v > 64)
      throw InputError("transpose: perm='" + it->second + "': '" + part + "' is not a dim");
    c.perm.push_back(v);
  }
  if (c.perm.empty()) throw InputError("transpose: perm='" + it->second + "' lists no dim");
  return c;
}

std::string perm_text(const std::vector<std::size_t>& perm) {
  std::string out;
  for (std::size_t i = 0; i < perm.size(); ++i) out += (i ? "," : "") + std::to_string(perm[i]);
  return out;
}

// The call's permutation of a `dims`-d tensor, checked.
std::vector<std::size_t> perm_of(const TransposeCall& c, std::size_t dims) {
  std::vector<std::size_t> perm(dims);
  for (std::size_t i = 0; i < dims; ++i) perm[i] = i;
  if (c.perm.empty()) {
    if (dims >= 2) std::swap(perm[dims - 1], perm[dims - 2]);
    return perm;
  }
  std::vector<std::size_t> sorted = c.perm;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i)
    if (sorted.size() != dims || sorted[i] != i)
      throw InputError("transpose: perm='" + perm_text(c.perm) + "' is not a permutation of the " + std::to_string(dims) + " dims");
  return c.perm;
}

OpDef transpose_op() {
  OpDef d;
  d.name = "transpose";
  d.takes_integers = true;  // bytes are moved as they are
  d.summary = "permute dims (-p perm=..., default: swap the last two); the last dim stays last or swaps with the one before";
  d.params = {{"shape", kRequired}, {"perm", "(the last two swapped)"}};
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  d.inputs = [](const Params& p, DType t) {
    return std::vector<TensorDesc>{{param_shape(p), t}};
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const Shape& s = in[0].shape;
    if (s.size() > kMaxDims) throw InputError("transpose: at most 8 dims");
    const std::vector<std::size_t> perm = perm_of(call_as<TransposeCall>(call, "transpose"), s.size());
    const std::size_t n = s.size();
    PermArgs a;
    a.dims = u32(n);
    std::vector<std::uint64_t> stride(n, 1);
    for (std::size_t k = n - 1; k-- > 0;) stride[k] = stride[k + 1] * s[k + 1];
    Shape out(n);
    for (std::size_t k = 0; k < n; ++k) {
      out[k] = s[perm[k]];
      a.out_shape[k] = out[k];
      a.src_stride[k] = stride[perm[k]];
    }
    const bool keeps_last = perm[n - 1] == n - 1;
    a.swap = !keeps_last;
    if (a.swap && hw::isa::dtype_bytes(in[0].dtype) == 1)
      throw InputError(
          "transpose: swapping the last two dims of int8 data is not supported (the vector Gather takes 16- "
          "and 32-bit elements)");
    if (a.swap && hw::isa::dtype_bytes(in[0].dtype) == 1)
      throw InputError(
          "transpose: swapping the last two dims of int8 data is not supported (the vector Gather takes 16- "
          "and 32-bit elements)");
    if (!keeps_last && !(n >= 2 && perm[n - 1] == n - 2 && perm[n - 2] == n - 1))
      throw InputError("transpose: perm='" + perm_text(perm) + "' moves the last dim elsewhere than the one before it (not supported)");
    const std::uint64_t es = hw::isa::dtype_bytes(in[0].dtype), ub = chip.buffers.ub.size - 512;
    OpPlan plan;
    plan.outputs = {{out, in[0].dtype}};
    plan.type = KernelType::kVector;
    std::uint64_t units = 0;
    if (keeps_last) {
      const std::uint64_t row = ceil_to(s[n - 1] * es, 32);
      if (2 * row > ub) throw InputError("transpose: a row of " + std::to_string(s[n - 1]) + " elements does not fit the UB");
      a.rows_per_tile = std::min<std::uint64_t>({4095, ub / (2 * row), n >= 2 ? out[n - 2] : 1});
      std::uint64_t groups = 1;
      for (std::size_t k = 0; k + 2 < n; ++k) groups *= out[k];
      units = groups * ceil_div(n >= 2 ? out[n - 2] : 1, a.rows_per_tile);
    } else {
      // Square-ish blocks: 2 in + 2 out buffers of T and the offsets (4 B per element) in the UB.
      std::uint64_t side = 16;
      auto fits = [&](std::uint64_t b) { return 4 * b * b * es + b * b * 4 + b * 4 <= ub; };
      while (side < 256 && fits(2 * side)) side *= 2;
      a.tr = std::min<std::uint64_t>(side, s[n - 2]);
      a.tc = std::min<std::uint64_t>(side, s[n - 1]);
      std::uint64_t batches = 1;
      for (std::size_t k = 0; k + 2 < n; ++k) batches *= out[k];
      units = batches * ceil_div(s[n - 2], a.tr) * ceil_div(s[n - 1], a.tc);
    }
    plan.block_dim = u32(std::min<std::uint64_t>(units, chip.vector_units()));
    plan.tiling = {{"swap_last_two", a.swap ? 1.0 : 0.0}, {"block_rows", static_cast<double>(a.tr)},
                   {"block_cols", static_cast<double>(a.tc)}, {"rows_per_copy", static_cast<double>(a.rows_per_tile)}};
    const DType t = in[0].dtype;
    plan.kernel = [a, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      PermArgs g = a;
      g.x = buf[0];
      g.out = buf[1];
      switch (t) {
        case DType::kFp16: return g.swap ? std::function<void()>([g] { swap_last<half>(g); }) : [g] { move_rows<half>(g); };
        case DType::kBf16: return g.swap ? std::function<void()>([g] { swap_last<bfloat16_t>(g); }) : [g] { move_rows<bfloat16_t>(g); };
        case DType::kInt8:
          return g.swap ? std::function<void()>([g] { swap_last<std::int8_t>(g); })
                        : [g] { move_rows<std::int8_t>(g); };
        default: return g.swap ? std::function<void()>([g] { swap_last<float>(g); }) : [g] { move_rows<float>(g); };
      }
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const Shape& s = in[0].shape;
    const std::size_t n = s.size();
    const std::vector<std::size_t> perm = perm_of(call_as<TransposeCall>(call, "transpose"), n);
    std::vector<std::uint64_t> stride(n, 1);
    for (std::size_t k = n - 1; k-- > 0;) stride[k] = stride[k + 1] * s[k + 1];
    HostTensor out(v[0].size());
    for (std::uint64_t i = 0; i < out.size(); ++i) {
      std::uint64_t flat = i, src = 0;
      for (std::size_t k = n; k-- > 0;) {
        src += (flat % s[perm[k]]) * stride[perm[k]];
        flat /= s[perm[k]];
      }
      out[i] = v[0][src];
    }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> transpose_ops() { return {transpose_op()}; }

}  // namespace npusim::stack::ops
