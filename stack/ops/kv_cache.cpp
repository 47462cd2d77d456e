// reshape_and_cache: the new tokens' keys and values written into a paged cache in place (vLLM's
// reshape_and_cache, vLLM-Ascend's _npu_reshape_and_cache). key and value are [T, KVN, D]; the caches are
// [pages, page, KVN, D], i.e. pages x page rows of KVN D elements; slot_mapping [T] (int32) gives each token's cache
// row (page index x page + offset). A negative slot skips its token (vLLM's padding tokens); a slot past the cache
// stops the kernel with an error naming the token.
//
// The tokens are dealt over the vector cores in tiles of up to 256. Per tile a core loads the tile's slots into
// the UB, the scalar unit reads each one (after an MTE2 -> S flag), MTE2 copies the token's key and value rows into
// a stage and MTE3 copies them to their rows of the caches: two stages, so MTE2 fills one while MTE3 drains the
// other. In timing-only mode the UB holds no values and token t goes to row t.
#include <algorithm>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

constexpr const char* kOp = "reshape_and_cache";
constexpr std::uint64_t kTile = 256;  // slots per tile: 1 KiB of the UB

struct CacheArgs {
  GM_ADDR key = 0, value = 0, key_cache = 0, value_cache = 0, slots = 0;
  std::uint64_t tokens = 0, rows = 0;  // T, and the cache's rows (pages x page)
  std::uint64_t h = 0;                 // elements of a row (KVN D)
  std::uint64_t per_core = 0;          // tokens per block
};

template <class T>
void cache_kernel(const CacheArgs& a) {
  const std::uint64_t lp = ub_row<T>(a.h);  // a row's pitch in the UB
  TPipe pipe;
  TBuf<TPosition::VECIN> idx;
  TBuf<TPosition::VECIN> stage[2];  // a key row then a value row
  pipe.InitBuffer(idx, kTile * 4);
  for (auto& s : stage) pipe.InitBuffer(s, 2 * lp * sizeof(T));
  const std::uint32_t loaded = pipe.AllocEventID(PIPE_MTE2, PIPE_S);
  const std::uint32_t moved[2] = {pipe.AllocEventID(PIPE_MTE2, PIPE_MTE3), pipe.AllocEventID(PIPE_MTE2, PIPE_MTE3)};
  const std::uint32_t freed[2] = {pipe.AllocEventID(PIPE_MTE3, PIPE_MTE2), pipe.AllocEventID(PIPE_MTE3, PIPE_MTE2)};
  const bool functional = functional_mode();
  const LocalTensor<std::int32_t> iv = idx.Get<std::int32_t>();
  const std::uint64_t first = GetBlockIdx() * a.per_core, last = std::min(a.tokens, first + a.per_core);
  std::uint64_t step = 0;
  for (std::uint64_t t0 = first; t0 < last; t0 += kTile) {
    const std::uint64_t n = std::min(kTile, last - t0);
    copy_in(iv, a.slots + t0 * 4, n);
    set_flag(PIPE_MTE2, PIPE_S, loaded);
    wait_flag(PIPE_MTE2, PIPE_S, loaded);
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::int64_t slot = functional ? iv.GetValue(i) : static_cast<std::int64_t>((t0 + i) % a.rows);
      if (!functional) (void)iv.GetValue(i);  // the read is timed either way
      if (slot < 0) continue;
      if (static_cast<std::uint64_t>(slot) >= a.rows)
        throw InputError(std::string(kOp) + ": slot " + std::to_string(slot) + " of token " + std::to_string(t0 + i) +
                         " is outside the cache's " + std::to_string(a.rows) + " rows");
      const std::size_t b = step % 2;
      if (step >= 2) wait_flag(PIPE_MTE3, PIPE_MTE2, freed[b]);
      const LocalTensor<T> buf = stage[b].Get<T>();
      const std::uint64_t src = (t0 + i) * a.h * sizeof(T), dst = static_cast<std::uint64_t>(slot) * a.h * sizeof(T);
      copy_rows_in(buf, a.key + src, 1, a.h, a.h);
      copy_rows_in(buf[lp], a.value + src, 1, a.h, a.h);
      set_flag(PIPE_MTE2, PIPE_MTE3, moved[b]);
      wait_flag(PIPE_MTE2, PIPE_MTE3, moved[b]);
      copy_rows_out(a.key_cache + dst, buf, 1, a.h, a.h);
      copy_rows_out(a.value_cache + dst, buf[lp], 1, a.h, a.h);
      set_flag(PIPE_MTE3, PIPE_MTE2, freed[b]);
      ++step;
    }
    // The next tile's slots overwrite these only once the scalar unit has read them (it has: it issued the copies).
  }
  for (std::uint64_t s = step >= 2 ? step - 2 : 0; s < step; ++s) wait_flag(PIPE_MTE3, PIPE_MTE2, freed[s % 2]);
}

OpDef reshape_and_cache_op() {
  OpDef d;
  d.name = kOp;
  d.summary =
      "new keys and values [T, KVN, D] written in place into paged caches [pages, page, KVN, D] at slot_mapping [T] "
      "(int32 cache rows; a negative slot skips its token)";
  d.params = {{"T", kRequired}, {"KVN", kRequired}, {"D", kRequired}, {"page", "128"}, {"pages", kRequired}};
  d.takes_integers = true;  // the slots; plan checks the rows are fp16, bf16 or fp32
  d.parse = [](const Params&) -> Call { return Operands{}; };
  d.inputs = [](const Params& p, DType t) {
    for (const char* key : {"T", "KVN", "D", "pages"})
      if (!p.count(key))
        throw InputError(std::string(kOp) + ": parameter '" + key + "' is required (T, KVN, D, pages; page optional)");
    const std::uint64_t T = param_uint(p, "T", 1, 1u << 24), kvn = param_uint(p, "KVN", 1, 1u << 10);
    const std::uint64_t D = param_uint(p, "D", 1, 1024), page = param_uint(p, "page", 128, 4096);
    const std::uint64_t pages = param_uint(p, "pages", 1, 1u << 24);
    if (!T || !kvn || !D || !page || !pages)
      throw InputError(std::string(kOp) + ": T, KVN, D, page and pages must be positive");
    const Shape rows{T, kvn, D}, cache{pages, page, kvn, D};
    return std::vector<TensorDesc>{{rows, t}, {rows, t}, {cache, t}, {cache, t}, {{T}, DType::kInt32}};
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    (void)call_as<Operands>(call, kOp);
    if (in.size() != 5)
      throw InputError(std::string(kOp) + " takes 5 inputs (key, value, key_cache, value_cache, slot_mapping), given " +
                       std::to_string(in.size()));
    const DType t = in[0].dtype;
    if (t == DType::kInt32 || t == DType::kInt8)
      throw InputError(std::string(kOp) + ": the keys must be fp16, bf16 or fp32");
    if (in[4].dtype != DType::kInt32) throw InputError(std::string(kOp) + ": slot_mapping must be int32");
    for (std::size_t i = 1; i < 4; ++i)
      if (in[i].dtype != t) throw InputError(std::string(kOp) + ": the keys, values and caches must share one dtype");
    CacheArgs a;
    a.tokens = elements(in[4].shape);
    if (a.tokens == 0) throw InputError(std::string(kOp) + ": slot_mapping has no tokens");
    const Shape& cs = in[2].shape;
    if (in[0].shape.size() < 2 || cs.size() < 3 || in[0].shape != in[1].shape || cs != in[3].shape)
      throw InputError(std::string(kOp) + ": key and value must be [T, KVN, D] and the caches [pages, page, KVN, D]");
    a.h = elements(in[0].shape) / in[0].shape[0];
    if (in[0].shape[0] != a.tokens)
      throw InputError(std::string(kOp) + ": " + std::to_string(in[0].shape[0]) + " tokens of keys, " +
                       std::to_string(a.tokens) + " slots");
    if (elements(cs) % a.h != 0 || cs.back() * (cs.size() > 3 ? cs[cs.size() - 2] : 1) != a.h)
      throw InputError(std::string(kOp) + ": cache rows of " + shape_string(cs) + " are not the keys' rows of " +
                       std::to_string(a.h) + " elements");
    a.rows = elements(cs) / a.h;
    const std::uint64_t es = hw::isa::dtype_bytes(t);
    const std::uint64_t row_bytes = ceil_to(a.h * es, 32);
    if (4 * row_bytes + kTile * 4 > chip.buffers.ub.size)
      throw InputError(std::string(kOp) + ": a row of " + std::to_string(a.h) +
                       " elements is too long for two stages "
                       "of a key and a value row in the UB of chip " +
                       chip.name);
    const std::uint64_t cores = chip.vector_units();
    a.per_core = ceil_div(a.tokens, std::min(cores, a.tokens));
    OpPlan plan;
    plan.outputs = {in[2], in[3]};
    plan.in_place = {2, 3};
    plan.type = KernelType::kVector;
    plan.block_dim = u32(ceil_div(a.tokens, a.per_core));
    plan.compulsory_bytes = a.tokens * (4 + 4 * a.h * es);  // the slots, the rows read and the rows written
    plan.tiling = {{"tokens_per_block", static_cast<double>(a.per_core)}};
    plan.kernel = [a, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      CacheArgs g = a;
      g.key = buf.at(0);
      g.value = buf.at(1);
      g.key_cache = buf.at(2);
      g.value_cache = buf.at(3);
      g.slots = buf.at(4);
      if (t == DType::kFp32) return [g] { cache_kernel<float>(g); };
      return [g] { cache_kernel<half>(g); };
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call&, const std::vector<HostTensor>& v) {
    const std::uint64_t h = elements(in[0].shape) / in[0].shape[0], rows = elements(in[2].shape) / h;
    HostTensor kc = v[2], vc = v[3];
    for (std::size_t i = 0; i < v[4].size(); ++i) {
      const auto slot = static_cast<std::int64_t>(v[4][i]);
      if (slot < 0) continue;
      if (static_cast<std::uint64_t>(slot) >= rows)
        throw InputError(std::string(kOp) + " reference: a slot is outside the cache");
      std::copy_n(v[0].begin() + static_cast<std::ptrdiff_t>(i * h), h,
                  kc.begin() + slot * static_cast<std::ptrdiff_t>(h));
      std::copy_n(v[1].begin() + static_cast<std::ptrdiff_t>(i * h), h,
                  vc.begin() + slot * static_cast<std::ptrdiff_t>(h));
    }
    return std::vector<HostTensor>{kc, vc};
  };
  // Slots over the whole cache, some negative (skipped tokens).
  d.distinct_inputs = {4};
  d.ranges_of = [](const std::vector<TensorDesc>& in) {
    const std::uint64_t h = elements(in.at(0).shape) / in.at(0).shape.at(0), rows = elements(in.at(2).shape) / h;
    return std::vector<std::pair<float, float>>{
        {-1.0f, 1.0f}, {-1.0f, 1.0f}, {-1.0f, 1.0f}, {-1.0f, 1.0f}, {-2.0f, static_cast<float>(rows) - 0.5f}};
  };
  return d;
}

}  // namespace

std::vector<OpDef> kv_cache_ops() {
  return {reshape_and_cache_op()};
}

}  // namespace npusim::stack::ops
