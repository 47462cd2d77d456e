// Conv2D's kernel (conv_common.hpp): every tile of a block through L1, img2col into L0A, the Cube and the FixPipe.
#include <algorithm>

#include "stack/ops/conv/conv_common.hpp"

namespace npusim::stack::ops::conv {

namespace {

constexpr std::uint32_t kMaxLoad = 255;  // fractals one LoadData moves

// Tile t of the call: image, packed group, the pixels [m0, m0 + mt) and output channels [n0, n0 + nt) of the group.
struct TileAt {
  std::uint32_t image, pack, m0, mt, n0, nt;
};
TileAt tile_at(const ConvShape& s, const ConvTiling& t, std::uint64_t i) {
  TileAt at;
  const std::uint64_t per_pack = std::uint64_t{t.tiles_m} * t.tiles_n;
  at.image = u32(i / (per_pack * s.packs));
  at.pack = u32(i / per_pack % s.packs);
  const std::uint64_t r = i % per_pack;
  at.m0 = u32(r / t.tiles_n * t.base_m);
  at.n0 = u32(r % t.tiles_n * t.base_n);
  at.mt = u32(std::min<std::uint64_t>(t.base_m, s.pixels() - at.m0));
  at.nt = std::min(t.base_n, s.outputs_of(at.pack) - std::min(at.n0, s.outputs_of(at.pack)));
  return at;
}

// The input rows a tile reads, and the padding Load3D adds around them so that its output row 0 is the tile's
// first output row.
struct Band {
  std::uint32_t first_row = 0, rows = 0;  // output rows [first_row, first_row + rows)
  std::uint32_t h0 = 0, h = 0;            // input rows [h0, h0 + h) in L1
  std::uint32_t pad_top = 0, pad_bottom = 0;
};
Band band_of(const ConvShape& s, const TileAt& at) {
  const Conv2dCall& c = s.call;
  Band b;
  b.first_row = at.m0 / s.wo;
  b.rows = (at.m0 + at.mt - 1) / s.wo - b.first_row + 1;
  const std::int64_t top = static_cast<std::int64_t>(b.first_row) * c.sh - c.pad_top;  // first tap row
  const std::int64_t span = static_cast<std::int64_t>(b.rows - 1) * c.sh + (c.kh - 1LL) * c.dh + 1;
  const std::int64_t lo = std::max<std::int64_t>(0, top), hi = std::min<std::int64_t>(s.h, top + span);
  b.h0 = static_cast<std::uint32_t>(lo);
  b.h = static_cast<std::uint32_t>(hi - lo);
  b.pad_top = static_cast<std::uint32_t>(lo - top);
  b.pad_bottom = static_cast<std::uint32_t>(top + span - hi);
  return b;
}

// One L1 step of a tile: channel planes [p0, p0 + planes) of its packed group.
struct Step {
  std::uint64_t tile;
  std::uint32_t p0, planes;
};

template <class T>
class ConvCube {
 public:
  explicit ConvCube(const ConvArgs& g) : g_(g), s_(g.s), t_(g.t) {
    const ConvBuffers b = conv_buffers(s_, t_);
    init_buffer(pipe_, qx1_, b.l1, "x1");
    init_buffer(pipe_, qw1_, b.l1, "w1");
    init_buffer(pipe_, qa2_, b.l0a, "a2");
    init_buffer(pipe_, qb2_, b.l0b, "b2");
    init_buffer(pipe_, qc_, b.l0c, "c");
    if (t_.bias_table) {
      init_buffer(pipe_, qbias1_, b.l1, "bias");
      init_buffer(pipe_, qbt_, b.bias_table, "bt");
    }
  }

  void run() {
    std::vector<Step> steps;
    for (std::uint64_t tile = GetBlockIdx(); tile < t_.tiles; tile += GetBlockNum()) {
      const TileAt at = tile_at(s_, t_, tile);
      if (at.nt == 0) continue;  // past the channels the last packed group has
      const std::uint32_t planes = s_.planes_of(at.pack);
      for (std::uint32_t p0 = 0; p0 < planes; p0 += t_.step_planes)
        steps.push_back({tile, p0, std::min(t_.step_planes, planes - p0)});
    }
    if (steps.empty()) return;
    load_l1(steps[0]);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const Step& st = steps[i];
      const TileAt at = tile_at(s_, t_, st.tile);
      if (st.p0 == 0) start_tile(at);
      if (i + 1 < steps.size()) load_l1(steps[i + 1]);  // the next step's copies run under this one's Mmads
      multiply_step(st, at);
      if (st.p0 + st.planes == s_.planes_of(at.pack)) drain_tile(at);
    }
  }

 private:
  static constexpr std::uint64_t kEs = sizeof(T);

  // MTE2: the step's band of input rows (every plane of the step) and its weights for the tile's channels.
  void load_l1(const Step& st) {
    const TileAt at = tile_at(s_, t_, st.tile);
    const Band b = band_of(s_, at);
    const std::uint64_t plane = std::uint64_t{s_.h} * s_.w * kC0;  // elements of one input plane
    const std::uint64_t first =
        (std::uint64_t{at.image} * s_.c1 + std::uint64_t{at.pack} * (s_.cin_p / kC0) + st.p0) * plane +
        std::uint64_t{b.h0} * s_.w * kC0;
    const std::uint64_t band_blocks = std::uint64_t{b.h} * s_.w;  // 32 B blocks of one plane's band
    const std::uint64_t gap = (std::uint64_t{s_.h} - b.h) * s_.w;
    LocalTensor<T> x1 = qx1_.template AllocTensor<T>();
    GlobalTensor<T> gx;
    gx.SetGlobalBuffer(g_.x);
    if (gap <= 65535) {
      DataCopy(x1, gx[first], DataCopyParams{u16(st.planes), u16(band_blocks), u16(gap), 0});
    } else {
      for (std::uint32_t p = 0; p < st.planes; ++p)
        DataCopy(x1[p * band_blocks * kC0], gx[first + p * plane], band_blocks * kC0);
    }
    qx1_.EnQue(x1);
    // FRACTAL_Z: per K row block (plane, tap), the group's Cout'/16 fractals; the tile takes nt / 16 of them.
    const std::uint64_t n1 = s_.cout_p / kC0, nt1 = ceil_div(at.nt, kC0), taps = s_.taps();
    const std::uint64_t rows = std::uint64_t{s_.cin_p / kC0} * taps;
    const std::uint64_t w0 = ((std::uint64_t{at.pack} * rows + std::uint64_t{st.p0} * taps) * n1 + at.n0 / kC0) * 256;
    LocalTensor<T> w1 = qw1_.template AllocTensor<T>();
    GlobalTensor<T> gw;
    gw.SetGlobalBuffer(g_.w);
    DataCopy(w1, gw[w0], DataCopyParams{u16(st.planes * taps), u16(nt1 * 16), u16((n1 - nt1) * 16), 0});
    qw1_.EnQue(w1);
  }

  // A new tile: its accumulator, and its bias through L1 into the bias table.
  void start_tile(const TileAt& at) {
    acc_ = qc_.template AllocTensor<float>();
    if (!t_.bias_table) return;
    bt_ = load_bias_table<T>(qbias1_, qbt_, g_.bias + (std::uint64_t{at.pack} * s_.cout_p + at.n0) * kEs, at.nt);
  }

  // One L1 step: its K = planes x taps x 16 columns in base_k slices, img2col into L0A, weights into L0B, Mmad.
  void multiply_step(const Step& st, const TileAt& at) {
    const Conv2dCall& c = s_.call;
    const Band b = band_of(s_, at);
    const std::uint32_t k_step = st.planes * s_.taps() * kC0, nt1 = u32(ceil_div(at.nt, kC0));
    LocalTensor<T> x1 = qx1_.template DeQue<T>(), w1 = qw1_.template DeQue<T>();
    for (std::uint32_t k0 = 0; k0 < k_step; k0 += t_.base_k) {
      const std::uint32_t kt = std::min(t_.base_k, k_step - k0);
      LocalTensor<T> a2 = qa2_.template AllocTensor<T>(), b2 = qb2_.template AllocTensor<T>();
      LoadData3DParams p;
      p.padList = {u8(c.pad_left), u8(c.pad_right), u8(b.pad_top), u8(b.pad_bottom)};
      p.l1H = u16(b.h);
      p.l1W = u16(s_.w);
      p.channelSize = u16(st.planes * kC0);
      p.kExtension = u16(kt);
      p.mExtension = u16(ceil_to(at.mt, 16));
      p.kStartPt = u16(k0);
      p.mStartPt = u16(at.m0 - b.first_row * s_.wo);
      p.strideW = u8(c.sw);
      p.strideH = u8(c.sh);
      p.filterW = u16(c.kw);
      p.filterH = u16(c.kh);
      p.dilationFilterW = u8(c.dw);
      p.dilationFilterH = u8(c.dh);
      LoadData(a2, x1, p);
      // The step's weights sit in L1 as L0B wants them: fractal (k, n) at k x nt1 + n.
      const std::uint32_t count = kt / kC0 * nt1, start = k0 / kC0 * nt1;
      for (std::uint32_t f = 0; f < count; f += kMaxLoad)
        LoadData(b2[std::uint64_t{f} * 256], w1,
                 LoadData2DParams{u16(start + f), u8(std::min(kMaxLoad, count - f)), 1, false});
      qa2_.EnQue(a2);
      qb2_.EnQue(b2);
      a2 = qa2_.template DeQue<T>();
      b2 = qb2_.template DeQue<T>();
      const bool first = st.p0 == 0 && k0 == 0;
      if (first && t_.bias_table) {
        Mmad(acc_, a2, b2, bt_, MmadParams{u16(at.mt), u16(at.nt), u16(kt), true, true});
        qbt_.FreeTensor(bt_);
      } else {
        Mmad(acc_, a2, b2, MmadParams{u16(at.mt), u16(at.nt), u16(kt), first, false});
      }
      qa2_.FreeTensor(a2);
      qb2_.FreeTensor(b2);
    }
    qx1_.FreeTensor(x1);
    qw1_.FreeTensor(w1);
  }

  // The tile done: each 16-channel column block of L0C is one output plane's run of pixels (NC1HWC0).
  void drain_tile(const TileAt& at) {
    qc_.EnQue(acc_);
    acc_ = qc_.template DeQue<float>();
    const std::uint32_t rows = u32(ceil_to(at.mt, 16));
    GlobalTensor<T> gout;
    gout.SetGlobalBuffer(g_.out);
    for (std::uint32_t j = 0; j * kC0 < at.nt; ++j) {
      const std::uint64_t plane = std::uint64_t{at.pack} * (s_.cout_p / kC0) + at.n0 / kC0 + j;
      const std::uint64_t dst = ((std::uint64_t{at.image} * s_.co1 + plane) * s_.pixels() + at.m0) * kC0;
      Fixpipe(gout[dst], acc_[std::uint64_t{j} * rows * kC0],
              FixpipeParams{u16(kC0), u16(at.mt), u16(rows), kC0, s_.call.relu});
    }
    qc_.FreeTensor(acc_);
  }

  const ConvArgs& g_;
  const ConvShape& s_;
  const ConvTiling& t_;
  TPipe pipe_;
  TQue<TPosition::A1, 2> qx1_, qw1_;
  TQue<TPosition::A2, 2> qa2_;
  TQue<TPosition::B2, 2> qb2_;
  TQue<TPosition::CO1, 1> qc_;
  TQue<TPosition::A1, 1> qbias1_;
  TQue<TPosition::C2, 1> qbt_;
  LocalTensor<float> acc_, bt_;
};

}  // namespace

template <class T>
void conv_kernel(const ConvArgs& g) {
  ConvCube<T>(g).run();
}

template void conv_kernel<half>(const ConvArgs&);
template void conv_kernel<bfloat16_t>(const ConvArgs&);

}  // namespace npusim::stack::ops::conv
