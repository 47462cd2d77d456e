// MatMul's kernels (matmul_common.hpp): the cube side (L1 -> L0 -> Cube -> FixPipe, every tile of a block) and the
// vector epilogue (on the AIV of a split chip, or after the cube work on a coupled core).
#include <algorithm>

#include "stack/ops/matmul/matmul_common.hpp"

namespace npusim::stack::ops::matmul {

namespace {

constexpr std::uint32_t kTileReady = 0;  // cross-core flag: AIC -> AIV, a tile is in GM
constexpr std::uint32_t kTileDone = 1;   // cross-core flag: AIV -> AIC, a tile's epilogue is done
constexpr std::uint32_t kMaxAhead = 8;   // tiles the cube may run ahead of the epilogue (flag counters saturate)

// Tile coordinates of tile `t`. Tiles go in groups of `group_m` tile rows, column by column inside a group, so
// the tiles running at the same time on the cores form a near-square window: its A rows and B columns are reused
// from the L2 while it sweeps the group, and B is streamed once per group instead of once per tile row. With
// `serpentine`, odd groups sweep the columns backwards (as Ascend's CATLASS block swizzle does): the B columns a
// group starts on are the ones the previous group used last, still in the L2 when the operands outgrow it.
struct TileAt {
  std::uint32_t batch, m0, n0, mt, nt;
};
TileAt tile_at(const MatmulArgs& g, std::uint32_t t) {
  const std::uint32_t per_batch = g.t.tiles_m * g.t.tiles_n;
  TileAt at;
  at.batch = t / per_batch;
  const std::uint32_t r = t % per_batch;
  const std::uint32_t per_group = g.t.group_m * g.t.tiles_n, first_m = r / per_group * g.t.group_m;
  const std::uint32_t rows = std::min(g.t.group_m, g.t.tiles_m - first_m), in_group = r % per_group;
  const std::uint32_t group = first_m / g.t.group_m, col = in_group / rows;
  at.m0 = (first_m + in_group % rows) * g.t.base_m;
  at.n0 = (g.t.serpentine && group % 2 == 1 ? g.t.tiles_n - 1 - col : col) * g.t.base_n;
  at.mt = std::min(g.t.base_m, g.s.M - at.m0);
  at.nt = std::min(g.t.base_n, g.s.N - at.n0);
  return at;
}

// One L1 step of a tile: K columns [kk0, kk0 + kl) of its A rows and B columns.
struct L1Step {
  std::uint32_t tile, local, kk0, kl;
};

// The cube side: every tile of this block through L1/L0 into L0C and out through the FixPipe. The loads of the
// next L1 step are issued before the LoadData/Mmad work of the current one (the production kernels' preload), so
// MTE2 runs a whole step ahead even though the scalar unit waits whenever a pipe queue is full.
template <class T>
class CubeSide {
 public:
  explicit CubeSide(const MatmulArgs& g) : g_(g), s_(g.s), t_(g.t) {
    // The buffers, exactly as the tiling planned and checked them.
    const MatmulBuffers b = matmul_buffers(s_, t_, kEs);
    init_buffer(pipe_, qa1_, b.l1, "a1");
    init_buffer(pipe_, qb1_, b.l1, "b1");
    init_buffer(pipe_, qa2_, b.l0a, "a2");
    init_buffer(pipe_, qb2_, b.l0b, "b2");
    init_buffer(pipe_, qc_, b.l0c, "c");
    if (t_.bias_table) {
      init_buffer(pipe_, qbias1_, b.l1, "bias");
      init_buffer(pipe_, qbt_, b.bias_table, "bt");
    }
  }

  void run() {
    // This block's steps, tile by tile.
    std::vector<L1Step> steps;
    const std::uint32_t tiles = s_.batch * t_.tiles_m * t_.tiles_n;
    std::uint32_t local = 0;
    for (std::uint32_t tile = GetBlockIdx(); tile < tiles; tile += GetBlockNum(), ++local)
      for (std::uint32_t kk0 = 0; kk0 < s_.K; kk0 += t_.step_k)
        steps.push_back({tile, local, kk0, std::min(t_.step_k, s_.K - kk0)});
    if (steps.empty()) return;
    load_l1(steps[0]);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const L1Step& st = steps[i];
      const TileAt at = tile_at(g_, st.tile);
      if (st.kk0 == 0) start_tile(at);
      if (i + 1 < steps.size()) load_l1(steps[i + 1]);
      multiply_step(st, at);
      if (st.kk0 + st.kl == s_.K) drain_tile(st, at);
    }
    // The epilogues of the last tiles (up to kMaxAhead) report done as well: their flags are taken here, so none is
    // left set for the next kernel on these cores (cross-core flags persist between kernels, as on the hardware: a
    // later mix kernel would see them set and read before its data is there).
    if (t_.vector_epilogue && g_.split)
      for (std::uint32_t k = std::min(local, kMaxAhead); k > 0; --k) cross_core_wait_flag(kTileDone, PIPE_FIX);
  }

 private:
  static constexpr std::uint64_t kEs = sizeof(T);

  GlobalTensor<T> matrix(GM_ADDR base, std::uint32_t batch, std::uint64_t elems) const {
    GlobalTensor<T> gt;
    gt.SetGlobalBuffer(base + static_cast<std::uint64_t>(batch) * elems * kEs);
    return gt;
  }

  // MTE2: the step's A rows and B columns into the next L1 buffers.
  void load_l1(const L1Step& st) {
    const TileAt at = tile_at(g_, st.tile);
    const GlobalTensor<T> ga = matrix(g_.a, at.batch, static_cast<std::uint64_t>(s_.M) * s_.K);
    const GlobalTensor<T> gb = matrix(g_.b, at.batch, static_cast<std::uint64_t>(s_.K) * s_.N);
    const std::uint32_t mt16 = u32(ceil_to(at.mt, 16)), nt16 = u32(ceil_to(at.nt, 16));
    const std::uint32_t kl16 = u32(ceil_to(st.kl, 16));
    LocalTensor<T> a1 = qa1_.template AllocTensor<T>(), b1 = qb1_.template AllocTensor<T>();
    if (!s_.trans_a) {  // A is M x K: rows of the tile, K columns
      DataCopy(a1, ga[static_cast<std::uint64_t>(at.m0) * s_.K + st.kk0],
               Nd2NzParams{1, u16(at.mt), u16(st.kl), 0, u16(s_.K), u16(mt16), 1, 0});
    } else {  // A is stored K x M
      DataCopy(a1, ga[static_cast<std::uint64_t>(st.kk0) * s_.M + at.m0],
               Nd2NzParams{1, u16(st.kl), u16(at.mt), 0, u16(s_.M), u16(kl16), 1, 0});
    }
    if (!s_.trans_b) {  // B is K x N
      DataCopy(b1, gb[static_cast<std::uint64_t>(st.kk0) * s_.N + at.n0],
               Nd2NzParams{1, u16(st.kl), u16(at.nt), 0, u16(s_.N), u16(kl16), 1, 0});
    } else {  // B is stored N x K
      DataCopy(b1, gb[static_cast<std::uint64_t>(at.n0) * s_.K + st.kk0],
               Nd2NzParams{1, u16(at.nt), u16(st.kl), 0, u16(s_.K), u16(nt16), 1, 0});
    }
    qa1_.EnQue(a1);
    qb1_.EnQue(b1);
  }

  // A new tile: its accumulator, and its bias through L1 into the bias table.
  void start_tile(const TileAt& at) {
    acc_ = qc_.template AllocTensor<float>();
    if (!t_.bias_table) return;
    bt_ = load_bias_table<T>(qbias1_, qbt_, g_.bias + static_cast<std::uint64_t>(at.n0) * kEs, at.nt);
  }

  // One L1 step: its K range in base_k slices through L0A/L0B into the Cube.
  void multiply_step(const L1Step& st, const TileAt& at) {
    const std::uint32_t M1 = u32(ceil_div(at.mt, 16)), N1 = u32(ceil_div(at.nt, 16));
    const std::uint32_t KL1 = u32(ceil_div(st.kl, 16));
    LocalTensor<T> a1 = qa1_.template DeQue<T>(), b1 = qb1_.template DeQue<T>();
    for (std::uint32_t k0 = 0; k0 < st.kl; k0 += t_.base_k) {
      const std::uint32_t kt = std::min(t_.base_k, st.kl - k0);
      const std::uint32_t k1 = u32(ceil_div(kt, 16)), fk0 = k0 / 16;
      LocalTensor<T> a2 = qa2_.template AllocTensor<T>(), b2 = qb2_.template AllocTensor<T>();
      // L0A wants fractal (fm, fk) at fm * k1 + fk, 16 m-rows x 16 k inside.
      for (std::uint32_t fm = 0; fm < M1; ++fm) {
        if (!s_.trans_a)  // L1 holds (fk, fm) at fk * M1 + fm
          LoadData(a2[static_cast<std::uint64_t>(fm) * k1 * 256], a1,
                   LoadData2DParams{u16(fk0 * M1 + fm), u8(k1), u16(M1), false});
        else  // L1 holds (fm, fk) at fm * KL1 + fk, 16 k-rows x 16 m inside
          LoadData(a2[static_cast<std::uint64_t>(fm) * k1 * 256], a1,
                   LoadData2DParams{u16(fm * KL1 + fk0), u8(k1), 1, true});
      }
      // L0B wants (fk, fn) at fk * N1 + fn, stored 16 n-rows x 16 k.
      if (!s_.trans_b) {  // L1 holds (fn, fk) at fn * KL1 + fk, 16 k-rows x 16 n
        for (std::uint32_t fk = 0; fk < k1; ++fk)
          LoadData(b2[static_cast<std::uint64_t>(fk) * N1 * 256], b1,
                   LoadData2DParams{u16(fk0 + fk), u8(N1), u16(KL1), true});
      } else {  // L1 holds (fk, fn) at fk * N1 + fn already as L0B wants it
        LoadData(b2, b1, LoadData2DParams{u16(fk0 * N1), u8(k1 * N1), 1, false});
      }
      qa2_.EnQue(a2);
      qb2_.EnQue(b2);
      a2 = qa2_.template DeQue<T>();
      b2 = qb2_.template DeQue<T>();
      const bool first = st.kk0 == 0 && k0 == 0;
      if (first && t_.bias_table) {
        Mmad(acc_, a2, b2, bt_, MmadParams{u16(at.mt), u16(at.nt), u16(kt), true, true});
      } else {
        Mmad(acc_, a2, b2, MmadParams{u16(at.mt), u16(at.nt), u16(kt), first, false});
      }
      qa2_.FreeTensor(a2);
      qb2_.FreeTensor(b2);
      if (first && t_.bias_table) qbt_.FreeTensor(bt_);
    }
    qa1_.FreeTensor(a1);
    qb1_.FreeTensor(b1);
  }

  // The tile's last step done: L0C drains through the FixPipe (ReLU there unless a vector epilogue follows).
  void drain_tile(const L1Step& st, const TileAt& at) {
    qc_.EnQue(acc_);
    acc_ = qc_.template DeQue<float>();
    if (t_.vector_epilogue && g_.split && st.local >= kMaxAhead) cross_core_wait_flag(kTileDone, PIPE_FIX);
    const GlobalTensor<T> gc = matrix(g_.c, at.batch, static_cast<std::uint64_t>(s_.M) * s_.N);
    Fixpipe(gc[static_cast<std::uint64_t>(at.m0) * s_.N + at.n0], acc_,
            FixpipeParams{u16(at.nt), u16(at.mt), u16(ceil_to(at.mt, 16)), s_.N,
                          s_.act == Activation::kRelu && !t_.vector_epilogue});
    if (t_.vector_epilogue && g_.split) cross_core_set_flag(2, PIPE_FIX, kTileReady);
    qc_.FreeTensor(acc_);
  }

  const MatmulArgs& g_;
  const MatmulShape& s_;
  const MatmulTiling& t_;
  TPipe pipe_;
  TQue<TPosition::A1, 2> qa1_;
  TQue<TPosition::B1, 2> qb1_;
  TQue<TPosition::A2, 2> qa2_;
  TQue<TPosition::B2, 2> qb2_;
  TQue<TPosition::CO1, 2> qc_;
  TQue<TPosition::A1, 1> qbias1_;
  TQue<TPosition::C2, 1> qbt_;
  LocalTensor<float> acc_, bt_;
};

template <class T>
void matmul_cube(const MatmulArgs& g) {
  CubeSide<T>(g).run();
}

// The vector epilogue on rows [r0, r1) of a finished tile in GM: out = act(out + bias), in fp32.
template <class T>
struct Epilogue {
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  TBuf<TPosition::VECCALC> fx, fa, fb, fc, fbias, fbias_t;
  std::uint32_t bias_loaded = 0, bias_used = 0;  // event ids

  void init(TPipe& pipe, const MatmulArgs& g) {
    // The buffers, exactly as the tiling planned and checked them.
    const BufferPlan ub = matmul_buffers(g.s, g.t, sizeof(T)).ub;
    init_buffer(pipe, qin, ub, "in");
    init_buffer(pipe, qout, ub, "out");
    init_buffer(pipe, fx, ub, "x");
    init_buffer(pipe, fa, ub, "a");
    init_buffer(pipe, fb, ub, "b");
    init_buffer(pipe, fc, ub, "c");
    if (g.s.bias && !g.t.bias_table) {
      init_buffer(pipe, fbias, ub, "bias");
      init_buffer(pipe, fbias_t, ub, "bias_t");
      bias_loaded = pipe.AllocEventID(PIPE_MTE2, PIPE_V);
      bias_used = pipe.AllocEventID(PIPE_V, PIPE_MTE2);
    }
  }

  void run(const MatmulArgs& g, const TileAt& at, std::uint32_t r0, std::uint32_t r1) {
    const std::uint64_t es = sizeof(T);
    const bool add_bias = g.s.bias && !g.t.bias_table;
    const GM_ADDR c = g.c + static_cast<std::uint64_t>(at.batch) * g.s.M * g.s.N * es;
    // The padded copies put each row 32 B-aligned: rows of T are `row` elements apart in UB, fp32 rows `frow`.
    const std::uint64_t row = ub_row<T>(at.nt), frow = ub_row<float>(at.nt);
    LocalTensor<float> x = fx.Get<float>(), bias = fbias.Get<float>();
    if (add_bias) {
      LocalTensor<T> bt = fbias_t.Get<T>();
      copy_in(bt, g.bias + static_cast<std::uint64_t>(at.n0) * es, at.nt);
      set_flag(PIPE_MTE2, PIPE_V, bias_loaded);
      wait_flag(PIPE_MTE2, PIPE_V, bias_loaded);
      convert(bias, bt, at.nt);
      set_flag(PIPE_V, PIPE_MTE2, bias_used);  // the next tile's bias load waits until this one is converted
      wait_flag(PIPE_V, PIPE_MTE2, bias_used);
    }
    for (std::uint32_t r = r0; r < r1; r += g.t.epi_rows) {
      const std::uint32_t nr = std::min<std::uint32_t>(g.t.epi_rows, r1 - r);
      const GM_ADDR at_gm = c + (static_cast<std::uint64_t>(at.m0 + r) * g.s.N + at.n0) * es;
      LocalTensor<T> in = qin.AllocTensor<T>();
      copy_rows_in(in, at_gm, nr, at.nt, g.s.N);
      qin.EnQue(in);
      in = qin.DeQue<T>();
      for (std::uint32_t i = 0; i < nr; ++i) convert(x[i * frow], in[i * row], at.nt);
      qin.FreeTensor(in);
      if (add_bias)
        for (std::uint32_t i = 0; i < nr; ++i) Add(x[i * frow], x[i * frow], bias, at.nt);
      activate(g.s.act, x, fa.Get<float>(), fb.Get<float>(), fc.Get<float>(), nr * frow);
      LocalTensor<T> out = qout.AllocTensor<T>();
      for (std::uint32_t i = 0; i < nr; ++i) convert(out[i * row], x[i * frow], at.nt);
      qout.EnQue(out);
      out = qout.DeQue<T>();
      copy_rows_out(at_gm, out, nr, at.nt, g.s.N);
      qout.FreeTensor(out);
    }
  }
};

// Calls f(tile coordinates) for every tile of this block, in the order the cube side computes them.
template <class F>
void for_each_tile(const MatmulArgs& g, F f) {
  const std::uint32_t tiles = g.s.batch * g.t.tiles_m * g.t.tiles_n;
  for (std::uint32_t tile = GetBlockIdx(); tile < tiles; tile += GetBlockNum()) f(tile_at(g, tile));
}

// The AIV side of a split-chip mix kernel: the epilogue of every tile of the group's cube core, half the rows each.
template <class T>
void matmul_vector(const MatmulArgs& g) {
  TPipe pipe;
  Epilogue<T> epi;
  epi.init(pipe, g);
  for_each_tile(g, [&](const TileAt& at) {
    const std::uint32_t half = (at.mt + 1) / 2;
    const std::uint32_t r0 = GetSubBlockIdx() == 0 ? 0 : half, r1 = GetSubBlockIdx() == 0 ? half : at.mt;
    CrossCoreWaitFlag(kTileReady);
    epi.run(g, at, r0, r1);
    // Fires once the rows are in GM (MTE3's earlier work done).
    cross_core_set_flag(2, PIPE_MTE3, kTileDone);
  });
}

// A coupled core: the cube work of every tile, then the epilogue of each tile once its FixPipe wrote it.
template <class T>
void matmul_coupled_epilogue(const MatmulArgs& g) {
  matmul_cube<T>(g);
  PipeBarrier<PIPE_ALL>();
  TPipe pipe;
  Epilogue<T> epi;
  epi.init(pipe, g);
  for_each_tile(g, [&](const TileAt& at) { epi.run(g, at, 0, at.mt); });
}
}  // namespace

template <class T>
void matmul_kernel(const MatmulArgs& g) {
  if (!g.t.vector_epilogue) return matmul_cube<T>(g);
  if (!g.split) return matmul_coupled_epilogue<T>(g);
  if (IsAic())
    matmul_cube<T>(g);
  else
    matmul_vector<T>(g);
}

template void matmul_kernel<half>(const MatmulArgs&);
template void matmul_kernel<bfloat16_t>(const MatmulArgs&);

}  // namespace npusim::stack::ops::matmul
