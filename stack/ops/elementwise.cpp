// Elementwise binary ops (Add, Sub, Mul, Div) with broadcasting of the second input over leading dimensions.
// Tiling: the output is split evenly over the vector cores; each core streams tiles through double-buffered
// VECIN/VECOUT queues sized from the UB (so a bigger UB gives bigger tiles). Same shapes run as one flat range;
// a broadcast b (its shape = the trailing dims of a) runs row by row with b loaded once. Tails and rows that are
// not whole 32 B blocks go through the padded copies.
#include <algorithm>
#include <cmath>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

enum class Bin { kAdd, kSub, kMul, kDiv };

template <class T>
void binary(Bin op, const LocalTensor<T>& d, const LocalTensor<T>& a, const LocalTensor<T>& b, std::uint64_t n) {
  switch (op) {
    case Bin::kAdd: Add(d, a, b, n); break;
    case Bin::kSub: Sub(d, a, b, n); break;
    case Bin::kMul: Mul(d, a, b, n); break;
    case Bin::kDiv: Div(d, a, b, n); break;
  }
}

// The kernel: output range [first, first + count) of block GetBlockIdx(); b repeats every `period` elements
// (period == n: no broadcast).
// A per-row scalar b (b's shape = a's with the last dim 1, e.g. a row mean): rows of h in tiles; each tile's b values
// are broadcast with Brcb into one 32 B block per row and applied with a zero source stride.
template <class T>
void column_kernel(Bin op, GM_ADDR a, GM_ADDR b, GM_ADDR out, std::uint64_t n, std::uint64_t h, std::uint64_t per_block,
                   std::uint64_t tile) {
  const std::uint64_t first_row = GetBlockIdx() * per_block, rows = n / h;
  if (first_row >= rows) return;
  const std::uint64_t count = std::min(per_block, rows - first_row), es = sizeof(T);
  const std::uint64_t row = ub_row<T>(h), tr = std::min<std::uint64_t>({std::max<std::uint64_t>(1, tile / row), 2040, count});
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qa, qb;
  TQue<TPosition::VECOUT, 2> qo;
  TBuf<TPosition::VECCALC> fbc;
  pipe.InitBuffer(qa, 2, tr * row * es);
  pipe.InitBuffer(qo, 2, tr * row * es);
  pipe.InitBuffer(qb, 2, ceil_to(tr * es, 32));
  pipe.InitBuffer(fbc, ceil_to(tr, 8) * 32);
  const std::uint64_t lanes = 256 / es, full = h / lanes, tail = h % lanes;
  const LocalTensor<T> bc = fbc.Get<T>();
  for (std::uint64_t r = 0; r < count; r += tr) {
    const std::uint64_t nr = std::min(tr, count - r), r0 = first_row + r;
    LocalTensor<T> la = qa.AllocTensor<T>(), lb = qb.AllocTensor<T>();
    copy_rows_in(la, a + r0 * h * es, nr, h, h);
    copy_in(lb, b + r0 * es, nr);
    qa.EnQue(la);
    qb.EnQue(lb);
    la = qa.DeQue<T>();
    lb = qb.DeQue<T>();
    Brcb(bc, lb, u8(ceil_div(nr, 8)), BrcbRepeatParams{1, 8});
    qb.FreeTensor(lb);
    LocalTensor<T> lo = qo.AllocTensor<T>();
    const BinaryRepeatParams p{1, 1, 0, 8, 8, 0};
    for (std::uint64_t i = 0; i < nr; ++i) {
      const LocalTensor<T> d = lo[i * row], s = la[i * row], v = bc[i * (32 / es)];
      auto apply = [&](std::uint64_t off, std::uint64_t mask, std::uint64_t rep) {
        switch (op) {
          case Bin::kAdd: Add(d[off], s[off], v, mask, u8(rep), p); break;
          case Bin::kSub: Sub(d[off], s[off], v, mask, u8(rep), p); break;
          case Bin::kMul: Mul(d[off], s[off], v, mask, u8(rep), p); break;
          case Bin::kDiv: Div(d[off], s[off], v, mask, u8(rep), p); break;
        }
      };
      for (std::uint64_t k = 0; k < full; k += 255) apply(k * lanes, lanes, std::min<std::uint64_t>(255, full - k));
      if (tail) apply(full * lanes, tail, 1);
    }
    qo.EnQue(lo);
    qa.FreeTensor(la);
    lo = qo.DeQue<T>();
    copy_rows_out(out + r0 * h * es, lo, nr, h, h);
    qo.FreeTensor(lo);
  }
}

template <class T>
void binary_kernel(Bin op, GM_ADDR a, GM_ADDR b, GM_ADDR out, std::uint64_t n, std::uint64_t period,
                   std::uint64_t per_block, std::uint64_t tile, bool stream) {
  const std::uint64_t first = GetBlockIdx() * per_block;
  if (first >= n) return;
  const std::uint64_t count = std::min(per_block, n - first);
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qa, qb;
  TQue<TPosition::VECOUT, 2> qo;
  const std::uint64_t tile_bytes = (tile * sizeof(T) + 31) / 32 * 32;
  pipe.InitBuffer(qa, 2, tile_bytes);
  pipe.InitBuffer(qo, 2, tile_bytes);
  if (stream) {  // b streams beside a (equal shapes, or a b too large to keep in the UB: its index wraps)
    pipe.InitBuffer(qb, 2, tile_bytes);
    for (std::uint64_t off = 0; off < count;) {
      const std::uint64_t pos = (first + off) % period;
      const std::uint64_t len = std::min({tile, count - off, period - pos});  // tiles do not cross a wrap of b
      const std::uint64_t at = (first + off) * sizeof(T);
      LocalTensor<T> la = qa.AllocTensor<T>(), lb = qb.AllocTensor<T>();
      copy_in(la, a + at, len);
      copy_in(lb, b + pos * sizeof(T), len);
      qa.EnQue(la);
      qb.EnQue(lb);
      la = qa.DeQue<T>();
      lb = qb.DeQue<T>();
      LocalTensor<T> lo = qo.AllocTensor<T>();
      binary(op, lo, la, lb, len);
      qo.EnQue(lo);
      qa.FreeTensor(la);
      qb.FreeTensor(lb);
      lo = qo.DeQue<T>();
      copy_out(out + at, lo, len);
      qo.FreeTensor(lo);
      off += len;
    }
    return;
  }
  // Broadcast: rows of `period` elements; each tile holds whole rows, b (one row) stays in UB.
  TBuf<TPosition::VECCALC> bb;
  pipe.InitBuffer(bb, (period * sizeof(T) + 31) / 32 * 32);
  LocalTensor<T> lb = bb.Get<T>();
  copy_in(lb, b, period);
  const std::uint32_t loaded = pipe.AllocEventID(PIPE_MTE2, PIPE_V);
  set_flag(PIPE_MTE2, PIPE_V, loaded);
  wait_flag(PIPE_MTE2, PIPE_V, loaded);
  const std::uint64_t row_stride = (period * sizeof(T) + 31) / 32 * 32 / sizeof(T);  // a row in UB, 32 B aligned
  const std::uint64_t rows_per_tile = std::max<std::uint64_t>(1, tile / row_stride);
  const std::uint64_t row0 = first / period, rows = count / period;
  for (std::uint64_t r = 0; r < rows; r += rows_per_tile) {
    const std::uint64_t nr = std::min(rows_per_tile, rows - r);
    LocalTensor<T> la = qa.AllocTensor<T>();
    GlobalTensor<T> g;
    g.SetGlobalBuffer(a + (row0 + r) * period * sizeof(T));
    DataCopyPad(la, g, DataCopyExtParams{u16(nr), u32(period * sizeof(T)), 0, 0}, DataCopyPadExtParams<T>{});
    qa.EnQue(la);
    la = qa.DeQue<T>();
    LocalTensor<T> lo = qo.AllocTensor<T>();
    for (std::uint64_t i = 0; i < nr; ++i) binary(op, lo[i * row_stride], la[i * row_stride], lb, period);
    qo.EnQue(lo);
    qa.FreeTensor(la);
    lo = qo.DeQue<T>();
    GlobalTensor<T> go;
    go.SetGlobalBuffer(out + (row0 + r) * period * sizeof(T));
    DataCopyPad(go, lo, DataCopyExtParams{u16(nr), u32(period * sizeof(T)), 0, 0});
    qo.FreeTensor(lo);
  }
}

std::uint64_t dtype_size(DType t) { return hw::isa::dtype_bytes(t); }

OpDef binary_op(const std::string& name, Bin op) {
  OpDef d;
  d.name = name;
  d.summary = "elementwise " + name + " with broadcasting of b over leading dimensions";
  d.params = {{"shape", kRequired}, {"shape_b", "shape"}};
  if (op == Bin::kDiv) d.input_ranges = {{-1.0f, 1.0f}, {0.5f, 2.0f}};  // divisors away from 0
  d.parse = [](const Params&) -> Call { return Operands{}; };
  d.inputs = [](const Params& p, DType t) {
    const Shape a = param_shape(p);
    const auto jt = p.find("shape_b");
    const Shape b = jt == p.end() ? a : parse_shape(jt->second);
    return std::vector<TensorDesc>{{a, t}, {b, t}};
  };
  d.plan = [op, name](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    call_as<Operands>(call, name);
    const Shape& a = in[0].shape;
    Shape b = in[1].shape;
    const DType t = in[0].dtype;
    // A per-row scalar: b = a's shape with the last dim 1.
    if (b.size() == a.size() && a.size() >= 2 && b.back() == 1 && a.back() != 1 &&
        std::equal(b.begin(), b.end() - 1, a.begin())) {
      const std::uint64_t n = elements(a), h = a.back(), size = dtype_size(t), rows = n / h;
      if (ub_row<float>(h) * 4 * 4 + 64 * 8 > chip.buffers.ub.size)
        throw InputError(name + ": a row of " + std::to_string(h) + " elements does not fit the UB of chip " + chip.name);
      OpPlan plan;
      plan.outputs = {{a, t}};
      plan.type = KernelType::kVector;
      const std::uint64_t per_block = ceil_div(rows, chip.vector_units());
      const std::uint64_t tile = (chip.buffers.ub.size - 4096) / (4 * size) / 16 * 16;  // two in, two out buffers
      plan.block_dim = u32(ceil_div(rows, per_block));
      plan.tiling = {{"tile_elements", static_cast<double>(tile)}, {"rows_per_block", static_cast<double>(per_block)},
                     {"column_broadcast", 1.0}};
      plan.kernel = [=](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
        const GM_ADDR pa = buf[0], pb = buf[1], po = buf[2];
        switch (t) {
          case DType::kFp16: return [=] { column_kernel<half>(op, pa, pb, po, n, h, per_block, tile); };
          case DType::kBf16: return [=] { column_kernel<bfloat16_t>(op, pa, pb, po, n, h, per_block, tile); };
          default: return [=] { column_kernel<float>(op, pa, pb, po, n, h, per_block, tile); };
        }
      };
      return plan;
    }
    while (b.size() > 1 && b.front() == 1) b.erase(b.begin());  // leading 1s broadcast
    if (b.size() > a.size() || !std::equal(b.begin(), b.end(), a.end() - static_cast<std::ptrdiff_t>(b.size()))) {
      throw InputError(name + ": cannot broadcast b of shape " + shape_string(in[1].shape) + " to " + shape_string(a) +
                       " (b must match the trailing dimensions of a, or be a's shape with the last dim 1)");
    }
    const std::uint64_t n = elements(a), period = elements(b), size = dtype_size(in[0].dtype);
    OpPlan plan;
    plan.outputs = {{a, in[0].dtype}};
    plan.type = KernelType::kVector;
    // Tiles: two buffers of a, b and out each in the UB (broadcast: one row of b instead), 32 B-aligned.
    const std::uint64_t ub = chip.buffers.ub.size;
    // A b row that would take more than an eighth of the UB streams beside a instead of staying resident.
    const bool stream = period == n || period * size > ub / 8;
    std::uint64_t tile = stream ? ub / (6 * size) : (ub - (period * size + 64)) / (4 * size);
    tile = std::min<std::uint64_t>(tile / 16 * 16, 65535 * 16);
    const std::uint64_t cores = chip.vector_units();
    // Split evenly over the cores, in whole 32 B blocks (a resident broadcast row: whole rows).
    const std::uint64_t unit = stream ? 32 / size : period;
    const std::uint64_t units = ceil_div(n, unit);
    const std::uint64_t per_block = ceil_div(units, cores) * unit;
    plan.block_dim = u32(ceil_div(n, per_block));
    plan.tiling = {{"tile_elements", static_cast<double>(tile)}, {"per_block", static_cast<double>(per_block)},
                   {"broadcast_period", static_cast<double>(period)}, {"streams_b", stream ? 1.0 : 0.0}};
    plan.kernel = [=](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      const GM_ADDR pa = buf[0], pb = buf[1], po = buf[2];
      switch (t) {
        case DType::kFp16: return [=] { binary_kernel<half>(op, pa, pb, po, n, period, per_block, tile, stream); };
        case DType::kBf16: return [=] { binary_kernel<bfloat16_t>(op, pa, pb, po, n, period, per_block, tile, stream); };
        default: return [=] { binary_kernel<float>(op, pa, pb, po, n, period, per_block, tile, stream); };
      }
    };
    return plan;
  };
  d.reference = [op](const std::vector<TensorDesc>& in, const Call&, const std::vector<HostTensor>& v) {
    const std::uint64_t n = elements(in[0].shape), period = v[1].size();
    const Shape& bs = in[1].shape;
    const bool column = bs.size() == in[0].shape.size() && bs.size() >= 2 && bs.back() == 1 && in[0].shape.back() != 1 &&
                        std::equal(bs.begin(), bs.end() - 1, in[0].shape.begin());
    const std::uint64_t h = in[0].shape.back();
    HostTensor out(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      const float x = v[0][i], y = column ? v[1][i / h] : v[1][i % period];
      out[i] = op == Bin::kAdd ? x + y : op == Bin::kSub ? x - y : op == Bin::kMul ? x * y : x / y;
    }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> elementwise_ops() {
  return {binary_op("add", Bin::kAdd), binary_op("sub", Bin::kSub), binary_op("mul", Bin::kMul), binary_op("div", Bin::kDiv)};
}

}  // namespace npusim::stack::ops
