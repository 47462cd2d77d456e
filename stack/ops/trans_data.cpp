// trans_data: NCHW <-> NC1HWC0, the layout conversion CANN's TransData does around Cube convolutions (-p to=5hd, or
// -p to=nchw -p channels=C). A unit is one channel plane (16 channels) of one image and up to `chunk` pixels:
// - to 5HD: each channel's run of pixels is copied into the UB as 32 B pieces 512 B apart, so that every 16 pixels
//   of the 16 channels form one 16 x 16 matrix; a vector Transpose per matrix turns it into 16 pixels of 16
//   channels, which is NC1HWC0's order, and one contiguous copy writes them. The channels past C are set to 0.
// - to NCHW: the reverse; only the real channels are written.
// fp16/bf16 (the vector Transpose takes 16-bit elements), the types the Cube's convolution runs in.
#include <algorithm>
#include <array>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

constexpr std::uint64_t kC0 = 16;
constexpr std::uint64_t kFractal = kC0 * kC0;  // elements of one 16 x 16 matrix

struct TransArgs {
  GM_ADDR x = 0, out = 0;
  bool to_5hd = true;
  std::uint64_t n = 0, c = 0, hw = 0, c1 = 0;
  std::uint64_t chunk = 0;  // pixels per unit, a multiple of 16
};

// Lanes of a 128-lane fp16 repeat (8 pixels of 16 channels) whose channel is `nc` or above.
std::array<std::uint64_t, 2> pad_lanes(std::uint64_t nc) {
  const std::uint64_t keep = (std::uint64_t{1} << nc) - 1, pad16 = ~keep & 0xFFFFu;
  const std::uint64_t word = pad16 | pad16 << 16 | pad16 << 32 | pad16 << 48;
  return {word, word};
}

template <class T>
void trans_data_kernel(const TransArgs& a) {
  constexpr std::uint64_t es = sizeof(T);
  const std::uint64_t chunks = ceil_div(a.hw, a.chunk), units = a.n * a.c1 * chunks;
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  pipe.InitBuffer(qin, 2, a.chunk * kC0 * es);
  pipe.InitBuffer(qout, 2, a.chunk * kC0 * es);
  GlobalTensor<T> gx, gout;
  gx.SetGlobalBuffer(a.x);
  gout.SetGlobalBuffer(a.out);
  for (std::uint64_t u = GetBlockIdx(); u < units; u += GetBlockNum()) {
    const std::uint64_t img = u / (a.c1 * chunks), plane = u / chunks % a.c1, p0 = u % chunks * a.chunk;
    const std::uint64_t np = std::min(a.chunk, a.hw - p0), full = np / kC0, tail = np % kC0;
    const std::uint64_t groups = ceil_div(np, kC0), nc = std::min(kC0, a.c - plane * kC0);
    const std::uint64_t nchw = (img * a.c + plane * kC0) * a.hw + p0;   // channel plane*16, pixel p0 (NCHW)
    const std::uint64_t hd = ((img * a.c1 + plane) * a.hw + p0) * kC0;  // the same in NC1HWC0
    LocalTensor<T> in = qin.AllocTensor<T>();
    if (a.to_5hd) {
      // Channel ch's pixels: 16 at a time into row ch of each matrix (32 B pieces, 15 blocks apart).
      for (std::uint64_t ch = 0; ch < nc; ++ch) {
        if (full > 0) DataCopy(in[ch * kC0], gx[nchw + ch * a.hw], DataCopyParams{u16(full), 1, 0, 15});
        if (tail > 0)
          DataCopyPad(in[full * kFractal + ch * kC0], gx[nchw + ch * a.hw + full * kC0],
                      DataCopyExtParams{1, u32(tail * es), 0, 0}, DataCopyPadExtParams<T>{});
      }
    } else {
      DataCopy(in, gx[hd], np * kC0);
    }
    qin.EnQue(in);
    in = qin.DeQue<T>();
    LocalTensor<T> out = qout.AllocTensor<T>();
    for (std::uint64_t g = 0; g < groups; ++g) Transpose(out[g * kFractal], in[g * kFractal]);
    if (a.to_5hd && nc < kC0) {
      const std::array<std::uint64_t, 2> lanes = pad_lanes(nc);
      const std::uint64_t mask[2] = {lanes[0], lanes[1]};
      for (std::uint64_t r = 0; r < groups * 2; r += 255)
        Duplicate(out[r * 128], 0.0, mask, u8(std::min<std::uint64_t>(255, groups * 2 - r)), 1, 8);
    }
    qin.FreeTensor(in);
    qout.EnQue(out);
    out = qout.DeQue<T>();
    if (a.to_5hd) {
      DataCopy(gout[hd], out, np * kC0);
    } else {
      for (std::uint64_t ch = 0; ch < nc; ++ch) {
        if (full > 0) DataCopy(gout[nchw + ch * a.hw], out[ch * kC0], DataCopyParams{u16(full), 1, 15, 0});
        if (tail > 0)
          DataCopyPad(gout[nchw + ch * a.hw + full * kC0], out[full * kFractal + ch * kC0],
                      DataCopyExtParams{1, u32(tail * es), 0, 0});
      }
    }
    qout.FreeTensor(out);
  }
}

TransDataCall parse_call(const Params& p) {
  TransDataCall c;
  const auto it = p.find("to");
  if (it == p.end()) throw InputError("parameter 'to' is required: to=5hd or to=nchw");
  if (it->second != "5hd" && it->second != "nchw")
    throw InputError("parameter to='" + it->second + "' is not one of 5hd, nchw");
  c.to_5hd = it->second == "5hd";
  c.channels = param_uint(p, "channels", 0, 1u << 20);
  if (!c.to_5hd && c.channels == 0) throw InputError("trans_data to=nchw needs -p channels=C (the real channels)");
  return c;
}

OpDef trans_data_op() {
  OpDef d;
  d.name = "trans_data";
  d.summary = "NCHW <-> NC1HWC0 (-p to=5hd, or -p to=nchw -p channels=C); fp16/bf16";
  d.params = {{"shape", kRequired}, {"to", kRequired}, {"channels", "(required with to=nchw)"}};
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  d.inputs = [](const Params& p, DType t) { return std::vector<TensorDesc>{{param_shape(p), t}}; };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const TransDataCall& c = call_as<TransDataCall>(call, "trans_data");
    const Shape& s = in[0].shape;
    if (hw::isa::dtype_bytes(in[0].dtype) != 2) throw InputError("trans_data takes fp16 or bf16");
    TransArgs a;
    a.to_5hd = c.to_5hd;
    Shape out;
    if (c.to_5hd) {
      if (s.size() != 4) throw InputError("trans_data to=5hd takes NCHW (4 dims), got " + shape_string(s));
      a.n = s[0];
      a.c = s[1];
      a.hw = s[2] * s[3];
      a.c1 = ceil_div(a.c, kC0);
      out = {s[0], a.c1, s[2], s[3], kC0};
    } else {
      if (s.size() != 5 || s[4] != kC0)
        throw InputError("trans_data to=nchw takes NC1HWC0 [N, C1, H, W, 16], got " + shape_string(s));
      if (ceil_div(c.channels, kC0) != s[1])
        throw InputError("trans_data: channels=" + std::to_string(c.channels) + " do not fill the " +
                         std::to_string(s[1]) + " channel planes of " + shape_string(s));
      a.n = s[0];
      a.c = c.channels;
      a.c1 = s[1];
      a.hw = s[2] * s[3];
      out = {s[0], c.channels, s[2], s[3]};
    }
    // Two in and two out buffers of chunk x 16 elements in the UB.
    const std::uint64_t fit = chip.buffers.ub.size / (4 * kC0 * 2) / kC0 * kC0;
    a.chunk = std::min<std::uint64_t>({fit, ceil_to(a.hw, kC0), 4096});
    if (a.chunk == 0) throw InputError("trans_data: the UB of chip " + chip.name + " cannot hold 16 pixels");
    OpPlan plan;
    plan.outputs = {{out, in[0].dtype}};
    plan.type = KernelType::kVector;
    const std::uint64_t units = a.n * a.c1 * ceil_div(a.hw, a.chunk);
    plan.block_dim = u32(std::min<std::uint64_t>(chip.vector_units(), units));
    plan.tiling = {{"chunk", static_cast<double>(a.chunk)}, {"units", static_cast<double>(units)}};
    const DType t = in[0].dtype;
    plan.kernel = [a, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      TransArgs args = a;
      args.x = buf[0];
      args.out = buf[1];
      if (t == DType::kBf16) return [args] { trans_data_kernel<bfloat16_t>(args); };
      return [args] { trans_data_kernel<half>(args); };
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const TransDataCall& c = call_as<TransDataCall>(call, "trans_data");
    const Shape& s = in[0].shape;
    const std::uint64_t n = s[0], hw = s[2] * s[3], ch = c.to_5hd ? s[1] : c.channels, c1 = ceil_div(ch, kC0);
    HostTensor out(c.to_5hd ? n * c1 * hw * kC0 : n * ch * hw, 0.0f);
    for (std::uint64_t b = 0; b < n; ++b)
      for (std::uint64_t k = 0; k < ch; ++k)
        for (std::uint64_t p = 0; p < hw; ++p) {
          const std::uint64_t i = (b * ch + k) * hw + p, j = ((b * c1 + k / kC0) * hw + p) * kC0 + k % kC0;
          if (c.to_5hd)
            out[j] = v[0][i];
          else
            out[i] = v[0][j];
        }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> trans_data_ops() {
  return {trans_data_op()};
}

}  // namespace npusim::stack::ops
