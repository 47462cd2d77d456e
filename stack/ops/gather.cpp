// Gather: rows of a table picked by int32 indices, out[i, :] = table[idx[i], :] (an embedding lookup, ONNX Gather
// on axis 0, GatherND over leading dims). The table is [V, ...] and is read as V rows of H = the product of its
// other dims; the output has the indices' shape followed by the table's other dims. A negative index counts from
// the end (ONNX's rule); one outside [-V, V) stops the kernel with an error naming it.
//
// The indices are dealt over the vector cores in tiles of up to R rows (R rows fit one of two stage buffers of
// half the UB less 1 KiB, R <= 256 so that the tile's indices fit that 1 KiB). Per
// tile a core loads the tile's indices into the UB, the scalar unit reads each one (after an MTE2 -> S flag) and
// issues one MTE2 copy of that row into the stage, and one MTE3 copy writes the R rows out: MTE2 fills one stage
// while MTE3 drains the other. A row longer than a stage goes in pieces. In timing-only mode the UB holds no
// values, so every index reads as 0 (every lookup reads row 0).
#include <algorithm>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

struct GatherArgs {
  GM_ADDR table = 0, idx = 0, out = 0;
  std::uint64_t rows = 0;      // V
  std::uint64_t h = 0;         // elements per row
  std::uint64_t n = 0;         // indices
  std::uint64_t per_tile = 1;  // rows per tile, or elements per piece of a long row
  bool pieces = false;         // a row spans several tiles
  std::uint64_t units = 0, stage_bytes = 0;
};

template <class T>
void gather_kernel(const GatherArgs& a) {
  const std::uint64_t es = sizeof(T);
  const std::uint64_t lp = a.pieces ? ub_row<T>(a.per_tile) : ub_row<T>(a.h);  // UB row pitch
  TPipe pipe;
  TBuf<TPosition::VECIN> idx;
  TBuf<TPosition::VECIN> stage[2];
  pipe.InitBuffer(idx, ceil_to((a.pieces ? 1 : a.per_tile) * 4, 32));
  for (auto& b : stage) pipe.InitBuffer(b, a.stage_bytes);
  const std::uint32_t loaded = pipe.AllocEventID(PIPE_MTE2, PIPE_S);
  const std::uint32_t moved[2] = {pipe.AllocEventID(PIPE_MTE2, PIPE_MTE3), pipe.AllocEventID(PIPE_MTE2, PIPE_MTE3)};
  const std::uint32_t freed[2] = {pipe.AllocEventID(PIPE_MTE3, PIPE_MTE2), pipe.AllocEventID(PIPE_MTE3, PIPE_MTE2)};
  const std::uint64_t chunks = a.pieces ? ceil_div(a.h, a.per_tile) : 1;
  const LocalTensor<std::int32_t> iv = idx.Get<std::int32_t>();
  std::uint64_t step = 0;
  for (std::uint64_t u = GetBlockIdx(); u < a.units; u += GetBlockNum(), ++step) {
    // The tile: indices [i0, i0 + nr), or piece c of index i0's row.
    std::uint64_t i0 = u * a.per_tile, nr = 0, c0 = 0, w = a.h;
    if (a.pieces) {
      i0 = u / chunks;
      c0 = (u % chunks) * a.per_tile;
      w = std::min(a.per_tile, a.h - c0);
      nr = 1;
    } else {
      nr = std::min(a.per_tile, a.n - i0);
    }
    copy_in(iv, a.idx + i0 * 4, nr);
    set_flag(PIPE_MTE2, PIPE_S, loaded);
    wait_flag(PIPE_MTE2, PIPE_S, loaded);
    const std::size_t b = step % 2;
    if (step >= 2) wait_flag(PIPE_MTE3, PIPE_MTE2, freed[b]);
    const LocalTensor<T> buf = stage[b].Get<T>();
    for (std::uint64_t r = 0; r < nr; ++r) {
      const std::int64_t at = iv.GetValue(r);
      const auto v = static_cast<std::int64_t>(a.rows);
      if (at < -v || at >= v)
        throw InputError("gather: index " + std::to_string(at) + " at position " + std::to_string(i0 + r) +
                         " is outside [-" + std::to_string(v) + ", " + std::to_string(v) + ")");
      const std::uint64_t row = static_cast<std::uint64_t>(at < 0 ? at + v : at);
      copy_rows_in(buf[r * lp], a.table + (row * a.h + c0) * es, 1, w, w);
    }
    set_flag(PIPE_MTE2, PIPE_MTE3, moved[b]);
    wait_flag(PIPE_MTE2, PIPE_MTE3, moved[b]);
    copy_rows_out(a.out + (i0 * a.h + c0) * es, buf, nr, w, a.h, lp);
    set_flag(PIPE_MTE3, PIPE_MTE2, freed[b]);
  }
  for (std::uint64_t s = step >= 2 ? step - 2 : 0; s < step; ++s) wait_flag(PIPE_MTE3, PIPE_MTE2, freed[s % 2]);
}

OpDef gather_op() {
  OpDef d;
  d.name = "gather";
  d.summary =
      "rows of a table [V, ...] picked by int32 indices (an embedding lookup); negative indices count from the end";
  d.params = {{"shape", kRequired}, {"indices", kRequired}};
  d.takes_integers = true;
  d.parse = [](const Params&) -> Call { return Operands{}; };
  d.inputs = [](const Params& p, DType t) {
    const auto it = p.find("indices");
    if (it == p.end()) throw InputError("gather: parameter 'indices' (the indices' shape, e.g. 2x16) is required");
    return std::vector<TensorDesc>{{param_shape(p), t}, {parse_shape(it->second), DType::kInt32}};
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    (void)call_as<Operands>(call, "gather");
    if (in.size() != 2)
      throw InputError("gather takes a table and indices, given " + std::to_string(in.size()) + " inputs");
    if (in[1].dtype != DType::kInt32) throw InputError("gather: the indices must be int32");
    const Shape& ts = in[0].shape;
    GatherArgs a;
    a.rows = ts.at(0);
    a.h = elements(ts) / a.rows;
    a.n = elements(in[1].shape);
    const std::uint64_t es = hw::isa::dtype_bytes(in[0].dtype);
    // Two stages and the index tile share the UB; a stage holds at least one row piece of 32 B.
    a.stage_bytes = (chip.buffers.ub.size - 1024) / 2 / 32 * 32;
    const std::uint64_t row_bytes = ceil_to(a.h * es, 32);
    if (row_bytes <= a.stage_bytes) {
      // At most 256 rows a tile: their indices (1 KiB) fit the UB the two stages leave.
      a.per_tile = std::min<std::uint64_t>({a.stage_bytes / row_bytes, 256, ceil_div(a.n, chip.vector_units())});
      a.units = ceil_div(a.n, a.per_tile);
    } else {
      a.pieces = true;
      a.per_tile = a.stage_bytes / es / 32 * 32;
      a.units = a.n * ceil_div(a.h, a.per_tile);
    }
    Shape out = in[1].shape;
    if (out.size() == 1 && out[0] == 1 && ts.size() > 1) out.clear();  // a scalar index drops the dim
    out.insert(out.end(), ts.begin() + 1, ts.end());
    if (out.empty()) out = {1};
    OpPlan plan;
    plan.outputs = {{out, in[0].dtype}};
    plan.compulsory_bytes = a.n * (4 + 2 * a.h * es);  // the indices, the rows picked and the output
    plan.type = KernelType::kVector;
    plan.block_dim = u32(std::min<std::uint64_t>(a.units, chip.vector_units()));
    plan.tiling = {{"rows_per_tile", a.pieces ? 1.0 : static_cast<double>(a.per_tile)},
                   {"row_pieces", a.pieces ? static_cast<double>(ceil_div(a.h, a.per_tile)) : 1.0}};
    const DType t = in[0].dtype;
    plan.kernel = [a, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      GatherArgs g = a;
      g.table = buf[0];
      g.idx = buf[1];
      g.out = buf[2];
      switch (hw::isa::dtype_bytes(t)) {
        case 1: return [g] { gather_kernel<std::int8_t>(g); };
        case 2: return [g] { gather_kernel<half>(g); };
        default: return [g] { gather_kernel<float>(g); };
      }
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call&, const std::vector<HostTensor>& v) {
    const std::uint64_t rows = in[0].shape.at(0), h = elements(in[0].shape) / rows;
    HostTensor out(v[1].size() * h);
    for (std::size_t i = 0; i < v[1].size(); ++i) {
      const auto at = static_cast<std::int64_t>(v[1][i]);
      const std::uint64_t row = static_cast<std::uint64_t>(at < 0 ? at + static_cast<std::int64_t>(rows) : at);
      std::copy_n(v[0].begin() + static_cast<std::ptrdiff_t>(row * h), h,
                  out.begin() + static_cast<std::ptrdiff_t>(i * h));
    }
    return std::vector<HostTensor>{out};
  };
  // Indices over the whole table, negative ones included.
  d.ranges_of = [](const std::vector<TensorDesc>& in) {
    const auto v = static_cast<float>(in.at(0).shape.at(0));
    return std::vector<std::pair<float, float>>{{-1.0f, 1.0f}, {-v, v - 0.5f}};
  };
  return d;
}

}  // namespace

std::vector<OpDef> gather_ops() {
  return {gather_op()};
}

}  // namespace npusim::stack::ops
