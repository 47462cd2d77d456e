// MatMul and BatchMatMul: C[b] = act(op(A[b]) op(B[b]) + bias), fp16/bf16 in, fp32 accumulation, output in the
// input dtype. The production data path of a Da Vinci cube core:
//   GM -(MTE2, ND->NZ)-> L1 (A1/B1 queues, two buffers, step_k columns of K each)
//      -(MTE1, LoadData, transposing where the layout needs it)-> L0A/L0B (A2/B2 queues, two buffers, base_k)
//      -(Cube, Mmad accumulating over K)-> L0C (CO1 queue, one or two buffers)
//      -(FixPipe, NZ->ND, fp32->T, optional ReLU)-> GM.
// The output is cut into base_m x base_n tiles spread over the cube cores round-robin, row-major so that cores
// running at the same time share rows of A and columns of B in the L2. A bias goes GM -> L1 -> bias table (fp32)
// and seeds the first Mmad of each tile. GELU (and a bias on a chip without a bias table) is a vector epilogue:
// on split chips the two AIV of the cube core's group take half the rows of each finished tile each (a mix kernel;
// the tile's arrival is a cross-core flag), on coupled chips the same core runs it after the FixPipe.
#include <algorithm>
#include <cmath>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

struct MatmulShape {
  std::uint32_t batch = 1, M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false, bias = false;
  Activation act = Activation::kNone;
};

struct MatmulTiling {
  std::uint32_t base_m = 0, base_n = 0, base_k = 0, step_k = 0, l0c_buffers = 1;
  std::uint32_t tiles_m = 0, tiles_n = 0, block_dim = 1;
  std::uint32_t group_m = 1;    // tile rows per group of the tile order (see tile_at)
  bool bias_table = false;      // the bias seeds the Mmad through the bias table
  bool vector_epilogue = false;  // activation (and a bias without a bias table) on the vector unit
  std::uint32_t epi_rows = 0;   // rows per vector-epilogue chunk
};

struct MatmulArgs {
  GM_ADDR a = 0, b = 0, bias = 0, c = 0;
  MatmulShape s;
  MatmulTiling t;
  bool split = true;  // split chip: the vector epilogue runs on the AIV
};

// The buffers the matmul kernels allocate for a tiling, one plan per space: L1 "a1", "b1" (double-buffered steps)
// and "bias"; L0A "a2"; L0B "b2"; L0C "c"; the bias table "bt"; and the vector epilogue's UB ("in", "out", "x", "a",
// "b", "c", "bias", "bias_t"). The tiling checks each plan against its buffer; the kernels allocate from them.
struct MatmulBuffers {
  BufferPlan l1, l0a, l0b, l0c, bias_table, ub;
};
MatmulBuffers matmul_buffers(const MatmulShape& s, const MatmulTiling& t, std::uint64_t es) {
  MatmulBuffers b;
  const std::uint64_t m = t.base_m, n = t.base_n;
  b.l1.add("a1", m * t.step_k * es, 2);
  b.l1.add("b1", t.step_k * n * es, 2);
  b.l0a.add("a2", m * t.base_k * es, 2);
  b.l0b.add("b2", t.base_k * n * es, 2);
  b.l0c.add("c", m * n * 4, t.l0c_buffers);
  if (t.bias_table) {
    b.l1.add("bias", ceil_to(n * es, 32));
    b.bias_table.add("bt", ceil_to(n * 4, 64));
  }
  if (t.vector_epilogue) {
    const std::uint64_t rows = t.epi_rows, row = ceil_to(n * es, 32), frow = ceil_to(n * 4, 32);
    b.ub.add("in", rows * row, 2);
    b.ub.add("out", rows * row, 2);
    for (const char* name : {"x", "a", "b", "c"}) b.ub.add(name, rows * frow);
    if (s.bias && !t.bias_table) {
      b.ub.add("bias", frow);
      b.ub.add("bias_t", ceil_to(n * es, 32));
    }
  }
  return b;
}

constexpr std::uint32_t kTileReady = 0;  // cross-core flag: AIC -> AIV, a tile is in GM
constexpr std::uint32_t kTileDone = 1;   // cross-core flag: AIV -> AIC, a tile's epilogue is done
constexpr std::uint32_t kMaxAhead = 8;   // tiles the cube may run ahead of the epilogue (flag counters saturate)

// Tile coordinates of tile `t`. Tiles go in groups of `group_m` tile rows, column by column inside a group, so
// the tiles running at the same time on the cores form a near-square window: its A rows and B columns are reused
// from the L2 while it sweeps the group, and B is streamed once per group instead of once per tile row.
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
  at.m0 = (first_m + in_group % rows) * g.t.base_m;
  at.n0 = (in_group / rows) * g.t.base_n;
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
    GlobalTensor<T> gbias;
    gbias.SetGlobalBuffer(g_.bias + static_cast<std::uint64_t>(at.n0) * kEs);
    LocalTensor<T> b1 = qbias1_.template AllocTensor<T>();
    DataCopyPad(b1, gbias, DataCopyExtParams{1, u32(at.nt * kEs), 0, 0}, DataCopyPadExtParams<T>{});
    qbias1_.EnQue(b1);
    b1 = qbias1_.template DeQue<T>();
    bt_ = qbt_.template AllocTensor<float>();
    DataCopyBias(bt_, b1, at.nt);
    qbt_.EnQue(bt_);
    qbias1_.FreeTensor(b1);
    bt_ = qbt_.template DeQue<float>();
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

template <class T>
void matmul_kernel(const MatmulArgs& g) {
  if (!g.t.vector_epilogue) return matmul_cube<T>(g);
  if (!g.split) return matmul_coupled_epilogue<T>(g);
  if (IsAic()) matmul_cube<T>(g);
  else matmul_vector<T>(g);
}

// Host tiling: the tile shape that minimises the estimated time (waves x per-tile time, the slower of the Cube
// and the GM feed), among those whose buffers fit the chip's L0A/L0B/L0C and L1.
MatmulTiling plan_tiling(const MatmulShape& s, std::uint64_t es, const config::ChipConfig& chip) {
  const auto& buf = chip.buffers;
  const std::uint64_t cores = chip.cube_cores();
  MatmulTiling best;
  double best_cost = 0;
  const std::uint32_t max_m = u32(ceil_to(s.M, 16)), max_n = u32(ceil_to(s.N, 16));
  for (std::uint32_t bm = 16; bm <= std::min<std::uint32_t>(max_m, 512); bm *= 2) {
    for (std::uint32_t bn = 16; bn <= std::min<std::uint32_t>(max_n, 512); bn *= 2) {
      const std::uint32_t m = std::min(bm, max_m), n = std::min(bn, max_n);
      if (m != bm && bm / 2 >= max_m) continue;  // clipped to the same size as a smaller candidate
      if (n != bn && bn / 2 >= max_n) continue;
      if (s.bias && buf.bias_table.size > 0 && n * 4ULL > buf.bias_table.size) continue;  // the bias row fits the table
      const std::uint64_t acc = static_cast<std::uint64_t>(m) * n * 4;
      if (acc > buf.l0c.size) continue;
      const std::uint32_t l0c_buffers = 2 * acc <= buf.l0c.size ? 2 : 1;
      // base_k: the largest multiple of 16 whose double buffers fit L0A and L0B.
      const std::uint64_t kmax = std::min(buf.l0a.size / (2 * m * es), buf.l0b.size / (2 * n * es));
      std::uint32_t k = u32(std::min<std::uint64_t>(kmax / 16 * 16, ceil_to(s.K, 16)));
      k = std::min<std::uint32_t>(k, 255 / std::max<std::uint32_t>(1, n / 16) * 16);  // one LoadData per L0B
      if (k < 16) continue;
      // step_k: as many base_k as the double-buffered A1/B1 (and a bias row) leave room for in L1.
      const std::uint64_t l1 = buf.l1.size - (s.bias ? ceil_to(n * es, 32) : 0);
      const std::uint64_t steps = l1 / (2 * (m + n) * es * k);
      if (steps == 0) continue;
      const std::uint32_t step = u32(std::min<std::uint64_t>(steps * k, ceil_to(s.K, k)));
      const std::uint64_t tiles = static_cast<std::uint64_t>(s.batch) * ceil_div(s.M, m) * ceil_div(s.N, n);
      const double waves = std::ceil(static_cast<double>(tiles) / static_cast<double>(cores));
      const double cube = static_cast<double>(ceil_div(m, 16) * ceil_div(n, 16) * ceil_div(s.K, 16));
      const double feed = static_cast<double>((m + n) * s.K * es) / chip.mte.gm_to_l1.bytes_per_cycle;
      const double drain = l0c_buffers == 2 ? 0 : static_cast<double>(m * n * es) / chip.fixpipe.bytes_per_cycle;
      const double cost = waves * (std::max(cube, feed) + drain);
      if (best.base_m == 0 || cost < best_cost * 0.999 || (cost <= best_cost * 1.001 && m * n > best.base_m * best.base_n)) {
        best = MatmulTiling{};
        best.base_m = m;
        best.base_n = n;
        best.base_k = k;
        best.step_k = step;
        best.l0c_buffers = l0c_buffers;
        best_cost = cost;
      }
    }
  }
  if (best.base_m == 0) throw InputError("matmul: no tile fits the L0/L1 buffers of chip " + chip.name);
  best.tiles_m = u32(ceil_div(s.M, best.base_m));
  best.tiles_n = u32(ceil_div(s.N, best.base_n));
  // A window of `cores` tiles about as tall as it is wide: group_m x base_m ~ (cores / group_m) x base_n.
  best.group_m = static_cast<std::uint32_t>(std::clamp<double>(  // in [1, tiles_m]
      std::round(std::sqrt(static_cast<double>(cores) * best.base_n / best.base_m)), 1.0, best.tiles_m));
  best.block_dim =
      u32(std::min<std::uint64_t>(cores, static_cast<std::uint64_t>(s.batch) * best.tiles_m * best.tiles_n));
  best.bias_table = s.bias && buf.bias_table.size >= best.base_n * 4ULL;
  best.vector_epilogue = (s.act != Activation::kNone && s.act != Activation::kRelu) || (s.bias && !best.bias_table);
  if (best.vector_epilogue) {
    // Rows per epilogue chunk: two in and two out buffers of T plus four fp32 rows (and a bias row) in the UB.
    const std::uint64_t frow = ub_row<float>(best.base_n) * 4, trow = ceil_to(best.base_n * es, 32);
    const std::uint64_t ub = chip.buffers.ub.size - 2 * frow - 2 * trow;
    best.epi_rows = u32(std::min<std::uint64_t>(ub / (4 * trow + 4 * frow), best.base_m));
    if (best.epi_rows == 0) throw InputError("matmul: a row of the output tile does not fit the UB of chip " + chip.name);
  }
  // The kernels allocate exactly these plans: a tiling whose plan outgrows a buffer is a bug here, said as one.
  const MatmulBuffers planned = matmul_buffers(s, best, es);
  const std::pair<const BufferPlan*, const config::BufferParams*> spaces[] = {{&planned.l1, &buf.l1},
                                                                              {&planned.l0a, &buf.l0a},
                                                                              {&planned.l0b, &buf.l0b},
                                                                              {&planned.l0c, &buf.l0c},
                                                                              {&planned.bias_table, &buf.bias_table},
                                                                              {&planned.ub, &buf.ub}};
  for (const auto& [plan, space] : spaces) {
    const std::uint64_t total = plan->total(std::max<std::uint64_t>(space->align, 1));
    if (total > space->size)
      throw std::logic_error("matmul tiling " + std::to_string(best.base_m) + "x" + std::to_string(best.base_n) + "x" +
                             std::to_string(best.base_k) + ": its buffers take " + std::to_string(total) + " B of a " +
                             std::to_string(space->size) + " B buffer");
  }
  return best;
}

MatMulAct parse_act(const std::string& v) {
  if (v == "none") return MatMulAct::kNone;
  if (v == "relu") return MatMulAct::kRelu;
  if (v == "gelu" || v == "gelu_erf") return MatMulAct::kGelu;
  if (v == "gelu_tanh") return MatMulAct::kGeluTanh;
  throw InputError("parameter act='" + v + "' is not one of none, relu, gelu, gelu_tanh");
}

Activation activation_of(MatMulAct a) {
  switch (a) {
    case MatMulAct::kRelu: return Activation::kRelu;
    case MatMulAct::kGelu: return Activation::kGeluErf;
    case MatMulAct::kGeluTanh: return Activation::kGeluTanh;
    default: return Activation::kNone;
  }
}

MatMulCall parse_call(const Params& p) {
  MatMulCall c;
  c.trans_a = param_uint(p, "trans_a", 0, 1);
  c.trans_b = param_uint(p, "trans_b", 0, 1);
  c.bias = param_uint(p, "bias", 0, 1);
  if (const auto it = p.find("act"); it != p.end()) c.act = parse_act(it->second);
  return c;
}

// The operands the text form describes: -p M, N, K (and B for a batch).
MatmulShape parse_matmul(const Params& p) {
  MatmulShape s;
  for (const char* key : {"M", "N", "K"})
    if (!p.count(key)) throw InputError(std::string("parameter '") + key + "' is required, e.g. -p M=1024 -p N=1024 -p K=1024");
  s.M = param_uint(p, "M", 0, 65535);
  s.N = param_uint(p, "N", 0, 65535);
  s.K = param_uint(p, "K", 0, 65535);
  s.batch = param_uint(p, "B", 1, 1u << 20);
  if (!s.M || !s.N || !s.K || !s.batch) throw InputError("matmul: M, N, K and B must be positive");
  const MatMulCall c = parse_call(p);
  s.trans_a = c.trans_a;
  s.trans_b = c.trans_b;
  s.bias = c.bias;
  s.act = activation_of(c.act);
  return s;
}

// The call's shape from its operands' descriptions and the call's flags.
MatmulShape shape_of(const std::vector<TensorDesc>& in, const MatMulCall& c) {
  MatmulShape s;
  s.trans_a = c.trans_a;
  s.trans_b = c.trans_b;
  s.bias = c.bias;
  s.act = activation_of(c.act);
  if (in.size() != (c.bias ? 3u : 2u))
    throw InputError("matmul: " + std::to_string(c.bias ? 3 : 2) + " operands (a, b" + (c.bias ? ", bias" : "") + ") expected, " +
                     std::to_string(in.size()) + " given");
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  if (a.size() != b.size() || a.size() < 2 || a.size() > 3)
    throw InputError("matmul: a and b must both be 2-D or both 3-D (batch), got " + shape_string(a) + " and " + shape_string(b));
  s.batch = a.size() == 3 ? u32(a[0]) : 1;
  if (a.size() == 3 && b[0] != a[0]) throw InputError("matmul: batch sizes differ: " + shape_string(a) + " and " + shape_string(b));
  const std::uint64_t am = a[a.size() - 2], ak = a[a.size() - 1], bk = b[b.size() - 2], bn = b[b.size() - 1];
  s.M = u32(s.trans_a ? ak : am);
  s.K = u32(s.trans_a ? am : ak);
  const std::uint64_t kb = s.trans_b ? bn : bk;
  s.N = u32(s.trans_b ? bk : bn);
  if (kb != s.K) throw InputError("matmul: K of a (" + std::to_string(s.K) + ") and b (" + std::to_string(kb) + ") differ");
  if (c.bias && elements(in[2].shape) != s.N)
    throw InputError("matmul: the bias is " + shape_string(in[2].shape) + ", not N = " + std::to_string(s.N) + " elements");
  return s;
}

OpDef matmul_op() {
  OpDef d;
  d.name = "matmul";
  d.summary = "C = act(op(A) op(B) + bias), batched with B > 1; fp16/bf16, fp32 accumulation (act: none, relu, gelu, gelu_tanh)";
  d.params = {"M", "N", "K", "B", "trans_a", "trans_b", "bias", "act"};
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  d.inputs = [](const Params& p, DType t) {
    if (t == DType::kFp32) throw InputError("matmul takes fp16 or bf16 (the Cube's fp32 path is not modelled by this kernel)");
    const MatmulShape s = parse_matmul(p);
    std::vector<TensorDesc> in;
    Shape a = s.trans_a ? Shape{s.K, s.M} : Shape{s.M, s.K};
    Shape b = s.trans_b ? Shape{s.N, s.K} : Shape{s.K, s.N};
    if (s.batch > 1) {
      a.insert(a.begin(), s.batch);
      b.insert(b.begin(), s.batch);
    }
    in.push_back({a, t});
    in.push_back({b, t});
    if (s.bias) in.push_back({Shape{s.N}, t});
    return in;
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const MatmulShape s = shape_of(in, call_as<MatMulCall>(call, "matmul"));
    const std::uint64_t es = hw::isa::dtype_bytes(in[0].dtype);
    OpPlan plan;
    Shape out = s.batch > 1 ? Shape{s.batch, s.M, s.N} : Shape{s.M, s.N};
    plan.outputs = {{out, in[0].dtype}};
    MatmulArgs g;
    g.s = s;
    g.t = plan_tiling(s, es, chip);
    g.split = chip.split();
    plan.type = g.t.vector_epilogue && g.split ? KernelType::kMix : KernelType::kCube;
    plan.block_dim = g.t.block_dim;
    plan.tiling = {{"base_m", g.t.base_m},       {"base_n", g.t.base_n},         {"base_k", g.t.base_k},
                   {"step_k", g.t.step_k},       {"l0c_buffers", g.t.l0c_buffers}, {"group_m", g.t.group_m}, {"tiles", s.batch * g.t.tiles_m * g.t.tiles_n},
                   {"bias_table", g.t.bias_table}, {"vector_epilogue", g.t.vector_epilogue}};
    plan.flops = 2.0 * s.batch * s.M * s.N * s.K;
    const DType t = in[0].dtype;
    plan.kernel = [g, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      MatmulArgs args = g;
      args.a = buf[0];
      args.b = buf[1];
      args.bias = g.s.bias ? buf[2] : 0;
      args.c = buf[g.s.bias ? 3 : 2];
      if (t == DType::kBf16) return [args] { matmul_kernel<bfloat16_t>(args); };
      return [args] { matmul_kernel<half>(args); };
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const MatmulShape s = shape_of(in, call_as<MatMulCall>(call, "matmul"));
    HostTensor out(static_cast<std::size_t>(s.batch) * s.M * s.N);
    std::vector<double> row(s.N);
    for (std::uint32_t b = 0; b < s.batch; ++b) {
      const float* A = v[0].data() + static_cast<std::size_t>(b) * s.M * s.K;
      const float* B = v[1].data() + static_cast<std::size_t>(b) * s.K * s.N;
      for (std::uint32_t i = 0; i < s.M; ++i) {
        std::fill(row.begin(), row.end(), 0.0);
        for (std::uint32_t k = 0; k < s.K; ++k) {
          const double a = s.trans_a ? A[static_cast<std::size_t>(k) * s.M + i] : A[static_cast<std::size_t>(i) * s.K + k];
          for (std::uint32_t j = 0; j < s.N; ++j)
            row[j] += a * (s.trans_b ? B[static_cast<std::size_t>(j) * s.K + k] : B[static_cast<std::size_t>(k) * s.N + j]);
        }
        for (std::uint32_t j = 0; j < s.N; ++j) {
          const double x = row[j] + (s.bias ? v[2][j] : 0.0);
          out[(static_cast<std::size_t>(b) * s.M + i) * s.N + j] = activate_ref(s.act, static_cast<float>(x));
        }
      }
    }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> matmul_ops() { return {matmul_op()}; }

}  // namespace npusim::stack::ops
