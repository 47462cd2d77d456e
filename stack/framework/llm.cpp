#include "stack/framework/llm.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "common/util/error.hpp"
#include "firmware/kernel/kernel_api.hpp"
#include "firmware/ts/dispatch.hpp"
#include "stack/framework/safetensors.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::framework {

using hw::isa::DType;

namespace {

std::string num(std::uint64_t v) {
  return std::to_string(v);
}

std::string shape(std::initializer_list<std::uint64_t> dims) {
  std::string s;
  for (std::uint64_t d : dims) s += (s.empty() ? "" : "x") + num(d);
  return s;
}

}  // namespace

LlmConfig LlmConfig::from_file(const std::string& path) {
  std::error_code ec;
  const std::string file = std::filesystem::is_directory(path, ec) ? path + "/config.json" : path;
  std::ifstream in(file);
  if (!in) throw InputError(file + ": cannot read the model's config.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw InputError(file + ": not a JSON object");
  LlmConfig c;
  c.source = file;
  c.dir = std::filesystem::path(file).parent_path().string();
  if (c.dir.empty()) c.dir = ".";
  const auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string())
    throw InputError(file + ": key 'architectures' (e.g. [\"LlamaForCausalLM\"]) is missing");
  c.architecture = (*arch)[0].get<std::string>();
  const std::vector<std::string> known = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"};
  if (std::find(known.begin(), known.end(), c.architecture) == known.end())
    throw InputError(file + ": architecture " + c.architecture +
                     " is not one the LLM runner models (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
  auto count = [&](const char* key, std::uint64_t max, std::optional<std::uint64_t> def = std::nullopt) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (def) return static_cast<std::uint32_t>(*def);
      throw InputError(file + ": key '" + key + "' is missing");
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() <= 0 || it->get<std::uint64_t>() > max)
      throw InputError(file + ": key '" + key + "' is " + it->dump() + ", not an integer from 1 to " + num(max));
    return static_cast<std::uint32_t>(it->get<std::uint64_t>());
  };
  auto real = [&](const char* key, double def) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
      throw InputError(file + ": key '" + key + "' is " + it->dump() + ", not a positive number");
    return it->get<double>();
  };
  auto flag = [&](const char* key, bool def) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_boolean()) throw InputError(file + ": key '" + key + "' is " + it->dump() + ", not true or false");
    return it->get<bool>();
  };
  auto text = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  c.hidden = count("hidden_size", 1u << 17);
  c.intermediate = count("intermediate_size", 1u << 19);
  c.layers = count("num_hidden_layers", 4096);
  c.heads = count("num_attention_heads", 1024);
  c.kv_heads = count("num_key_value_heads", 1024, c.heads);
  c.vocab = count("vocab_size", 1u << 22);
  c.max_positions = count("max_position_embeddings", 1u << 20, 4096);
  if (c.hidden % c.heads != 0 && !j.contains("head_dim"))
    throw InputError(file + ": hidden_size " + num(c.hidden) + " is not a multiple of num_attention_heads " +
                     num(c.heads));
  c.head_dim = count("head_dim", 1024, c.hidden / c.heads);
  if (c.heads % c.kv_heads != 0)
    throw InputError(file + ": num_attention_heads " + num(c.heads) + " is not a multiple of num_key_value_heads " +
                     num(c.kv_heads));
  c.rms_eps = real("rms_norm_eps", 1e-6);
  c.rope_theta = real("rope_theta", 10000);
  // RoPE options: transformers 4's rope_scaling, transformers 5's rope_parameters (which also holds rope_theta).
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const auto rs = j.find(key);
    if (rs == j.end() || rs->is_null()) continue;
    std::string type = "?";
    for (const char* k : {"type", "rope_type"})
      if (rs->is_object() && rs->contains(k) && (*rs)[k].is_string()) type = (*rs)[k].get<std::string>();
    if (type != "default") {
      std::string what = file;
      what.append(": ").append(key).append(" of type '").append(type).append("' is not modelled (plain RoPE only)");
      throw InputError(what);
    }
    if (const auto th = rs->find("rope_theta"); th != rs->end()) {
      if (!th->is_number() || !(th->get<double>() > 0))
        throw InputError(file + ": " + key + ".rope_theta is " + th->dump() + ", not a positive number");
      c.rope_theta = th->get<double>();
    }
  }
  if (flag("mlp_bias", false)) throw InputError(file + ": mlp_bias is not modelled (MLP projections without bias)");
  if (const auto lt = j.find("layer_types"); lt != j.end() && lt->is_array())
    for (const auto& t : *lt)
      if (t != "full_attention")
        throw InputError(file + ": layer type " + t.dump() + " is not modelled (full attention only)");
  if (const auto sw = j.find("sliding_window"); sw != j.end() && !sw->is_null() && flag("use_sliding_window", true))
    if (sw->is_number_integer() && sw->get<std::int64_t>() > 0 && c.architecture == "MistralForCausalLM")
      throw InputError(file + ": a sliding window of " + sw->dump() + " keys is not modelled (full attention only)");
  if (const std::string act = text("hidden_act"); !act.empty() && act != "silu")
    throw InputError(file + ": hidden_act '" + act + "' is not modelled (silu: SwiGLU)");
  c.tie_embeddings = flag("tie_word_embeddings", false);
  c.qkv_bias = c.architecture == "Qwen2ForCausalLM" || flag("attention_bias", false);
  // float16, or bfloat16; float32 models run in fp16, as the Cube computes (CANN's allow_fp32_to_fp16).
  const std::string dtype = !text("dtype").empty() ? text("dtype") : text("torch_dtype");
  c.dtype = dtype == "bfloat16" ? DType::kBf16 : DType::kFp16;
  return c;
}

std::uint64_t LlmConfig::parameters() const {
  const std::uint64_t h = hidden, d = head_dim, q = static_cast<std::uint64_t>(heads) * d;
  const std::uint64_t kv = static_cast<std::uint64_t>(kv_heads) * d;
  const std::uint64_t attn = h * q * 2 + h * kv * 2 + (qkv_bias ? q + 2 * kv : 0);
  const std::uint64_t layer = attn + 3 * h * intermediate + 2 * h;
  return layer * layers + static_cast<std::uint64_t>(vocab) * h * (tie_embeddings ? 1 : 2) + h;
}

namespace {

// The device tensors of one layer.
struct LayerWeights {
  std::uint64_t ln1 = 0, ln2 = 0, wq = 0, wk = 0, wv = 0, bq = 0, bk = 0, bv = 0, wo = 0, wgate = 0, wup = 0, wdown = 0;
  std::uint64_t k_cache = 0, v_cache = 0;
};

// Launches library ops on one stream, each call planned once per distinct text form (identical layers share their
// plans), with one workspace buffer grown to the largest any plan asks.
class Launcher {
 public:
  Launcher(const config::ChipConfig& chip, DType dtype) : chip_(chip), dtype_(dtype) {}

  static constexpr std::uint32_t kSimulate = UINT32_MAX;  // a launch that runs its kernel

  // Returns the launch's task id. With `replay_of` a task id, each block takes as long as the same block of that
  // earlier launch of the same call took, without running the kernel (replay_body).
  std::uint32_t launch(runtime::Device& d, runtime::Stream s, const std::string& op, const ops::Params& p,
                       std::vector<std::uint64_t> buffers, std::uint32_t replay_of = kSimulate) {
    std::string key = op;
    for (const auto& [k, v] : p) key.append(" ").append(k).append("=").append(v);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      const ops::OpDef* def = ops::find_op(op);
      if (!def) throw InputError("LLM runner: no library op '" + op + "'");
      const std::vector<ops::TensorDesc> in = Session::op_inputs(op, p, dtype_);
      it = plans_.emplace(key, ops::plan_op(*def, in, Session::op_call(op, p), chip_)).first;
    }
    const ops::OpPlan& plan = it->second;
    if (plan.workspace_bytes > workspace_bytes_) {
      if (workspace_) d.free(workspace_);
      workspace_ = d.malloc(plan.workspace_bytes);
      workspace_bytes_ = plan.workspace_bytes;
    }
    if (plan.workspace_bytes) buffers.push_back(workspace_);
    const std::uint32_t id = d.submitted();
    d.launch(ops::kernel_name(op), plan.type, plan.block_dim,
             replay_of != kSimulate ? replay_body(d, replay_of) : plan.kernel(buffers), s);
    return id;
  }

  // The workspace buffer back.
  void release(runtime::Device& d) {
    if (workspace_) d.free(workspace_);
    workspace_ = workspace_bytes_ = 0;
  }

 private:
  // A block of a replayed launch: the scalar unit busy for as long as the same block (same core kind, same AIV of
  // its group) of the recorded launch ran, start to end. The task scheduler records a block's run when it ends; on
  // one stream the recorded launch has ended before this one starts.
  static std::function<void()> replay_body(const runtime::Device& d, std::uint32_t task) {
    return [&d, task] {
      const fw::ts::TaskRecord* rec = nullptr;
      for (auto it = d.tasks().rbegin(); it != d.tasks().rend() && !rec; ++it)
        if (it->task_id == task) rec = &*it;
      if (!rec) throw InputError("LLM runner: replayed task " + std::to_string(task) + " has no record");
      namespace k = fw::kernel;
      const hw::core::CoreKind kind = k::IsAic()   ? hw::core::CoreKind::kCube
                                      : k::IsAiv() ? hw::core::CoreKind::kVector
                                                   : hw::core::CoreKind::kCoupled;
      std::vector<const fw::kernel::CoreRun*> runs;
      for (const fw::kernel::CoreRun& r : rec->runs)
        if (r.block == k::GetBlockIdx() && r.kind == kind) runs.push_back(&r);
      std::sort(runs.begin(), runs.end(), [](auto* a, auto* b) { return a->core_index < b->core_index; });
      const std::uint32_t sub = kind == hw::core::CoreKind::kVector ? k::GetSubBlockIdx() : 0;
      // The run began with the block's start-up, which this block spends too.
      const std::uint64_t init = fw::ts::block_init_cycles(d.chip().config());
      if (sub < runs.size()) k::ScalarWork(std::max(runs[sub]->end - runs[sub]->start, init) - init);
    };
  }

  const config::ChipConfig& chip_;
  DType dtype_;
  std::map<std::string, ops::OpPlan> plans_;
  std::uint64_t workspace_ = 0, workspace_bytes_ = 0;
};

// Values of one weight in the device's dtype: from the safetensors files, or seeded random (normal-ish with the
// standard deviation HuggingFace initialises with, 0.02; norms 1, biases 0).
class WeightSource {
 public:
  WeightSource(const std::string& dir, DType dtype) : st_(dir), dtype_(dtype) {}
  bool from_files() const { return !st_.empty(); }

  std::vector<std::uint8_t> bytes(const std::string& name, const std::vector<std::uint64_t>& shape, float fill) {
    std::vector<float> v;
    if (from_files()) {
      v = st_.read(name, shape);
    } else {
      std::uint64_t n = 1;
      for (auto s : shape) n *= s;
      v.resize(n, fill);
      if (std::isnan(fill)) {
        std::uniform_real_distribution<float> u(-0.0346f, 0.0346f);  // std 0.02
        for (float& x : v) x = u(rng_);
      }
    }
    return encode(v);
  }
  std::vector<std::uint8_t> encode(const std::vector<float>& v) const {
    const std::uint32_t es = hw::isa::dtype_bytes(dtype_);
    std::vector<std::uint8_t> out(v.size() * es);
    for (std::size_t i = 0; i < v.size(); ++i) hw::isa::store_float(&out[i * es], dtype_, v[i]);
    return out;
  }

 private:
  SafeTensors st_;
  DType dtype_;
  std::mt19937_64 rng_{2026};
};

// Per kernel name: launches and device time, from a call's task list.
nlohmann::json kernel_totals(const nlohmann::json& tasks) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& t : tasks) {
    if (t.value("type", "") != "kernel") continue;
    nlohmann::json& k = out[t["name"].get<std::string>()];
    if (k.is_null()) k = {{"count", 0}, {"us", 0.0}};
    k["count"] = k["count"].get<std::uint64_t>() + 1;
    k["us"] = k["us"].get<double>() + t["dur_us"].get<double>();
  }
  return out;
}

// The runner of one generate() call: the model's device tensors, the passes, the report.
class Generator {
 public:
  Generator(Session& session, const LlmConfig& cfg, const GenerateOptions& opts)
      : session_(session),
        cfg_(cfg),
        opts_(opts),
        functional_(session.functional()),
        B(opts.batch),
        P(opts.prompt_len),
        steps_(opts.decode_steps),
        H(cfg.hidden),
        I(cfg.intermediate),
        N(cfg.heads),
        KVN(cfg.kv_heads),
        D(cfg.head_dim),
        V(cfg.vocab),
        page_(opts.page),
        dt_(cfg.dtype),
        es_(hw::isa::dtype_bytes(cfg.dtype)),
        src_(functional_ ? opts.weights_dir : std::string(), cfg.dtype),
        run_(session.chip(), cfg.dtype) {
    check();
    cols_ = (P + steps_ + page_ - 1) / page_;
    pages_ = B * cols_;
    std::ostringstream os;
    os.precision(17);
    os << cfg.rms_eps;
    eps_ = os.str();
    // Layer replay (timing-only): no layer can find its own data of an earlier pass in the L2 when the other
    // layers' weights, read in between, are at least twice its capacity; then every layer from the second on
    // starts from the same memory state and layers 2.. take the kernel times layer 1 took in the same pass.
    const std::uint64_t layer_weights = (H * D * (2 * N + 2 * KVN) + 3 * H * I) * es_;
    replay_ = opts.replay && !functional_ && cfg.layers > 2 &&
              (cfg.layers - 1) * layer_weights >= 2 * session.chip().l2.capacity;
    layers_.resize(cfg.layers);
    next_.assign(B, 0);
    logits_.assign(B * V, 0.0f);
  }

  GenerateResult run() {
    const nlohmann::json load = session_.call([&](runtime::Device& d) { this->load(d); });
    std::vector<std::int32_t> prompt = opts_.prompt;
    if (prompt.empty() && functional_) {
      std::mt19937_64 rng(2026);
      prompt.resize(B * P);
      for (auto& t : prompt) t = static_cast<std::int32_t>(rng() % V);
    }
    result_.tokens.assign(B, {});
    const nlohmann::json prefill = session_.call([&](runtime::Device& d) { forward(d, P, 0, prompt); });
    record();
    std::vector<nlohmann::json> decode;
    for (std::uint64_t step = 0; step < steps_; ++step) {
      const std::vector<std::int32_t> ids = next_;
      decode.push_back(session_.call([&](runtime::Device& d) { forward(d, 1, P + step, ids); }));
      record();
    }
    // The model's device memory back (a Python session's device runs on after this call).
    session_.call([&](runtime::Device& d) {
      for (std::uint64_t a : allocs_) d.free(a);
      run_.release(d);
    });
    result_.report = session_.report();
    result_.report["decode"] = report(load, prefill, decode);
    return std::move(result_);
  }

 private:
  void check() const {
    if (!B || !P) throw InputError("LLM runner: the batch and the prompt length must be positive");
    if (P + steps_ > cfg_.max_positions)
      throw InputError("LLM runner: a prompt of " + num(P) + " tokens and " + num(steps_) + " decode steps pass the " +
                       num(cfg_.max_positions) + " positions of " + cfg_.source + " (max_position_embeddings)");
    if (page_ < 16 || page_ % 16 || page_ > 4096)
      throw InputError("LLM runner: --page " + num(page_) + " is not a multiple of 16 from 16 to 4096");
    const std::vector<std::int32_t>& prompt = opts_.prompt;
    if (!prompt.empty() && prompt.size() != B * P)
      throw InputError("LLM runner: " + num(prompt.size()) + " prompt tokens given for " + num(B) + " x " + num(P));
    for (std::size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] < 0 || static_cast<std::uint64_t>(prompt[i]) >= V)
        throw InputError("LLM runner: prompt token " + num(i) + " is " + std::to_string(prompt[i]) +
                         ", outside the vocabulary of " + num(V));
  }

  std::uint64_t alloc(runtime::Device& d, std::uint64_t bytes) {
    allocs_.push_back(d.malloc(bytes));
    return allocs_.back();
  }

  // A weight's device buffer, its values copied in (functional mode); counted in a decode step's reads unless not.
  std::uint64_t weight(runtime::Device& d, const std::string& name, const std::vector<std::uint64_t>& shape, float fill,
                       bool per_step = true) {
    std::uint64_t n = 1;
    for (auto s : shape) n *= s;
    const std::uint64_t addr = alloc(d, n * es_);
    if (per_step) weight_bytes_ += n * es_;
    if (functional_) {
      const std::vector<std::uint8_t> b = src_.bytes(name, shape, fill);
      d.memcpy_async(addr, b.data(), b.size(), stream_);
      d.synchronize(stream_);
    }
    return addr;
  }

  // Weights (functional: copied in; timing-only: allocated only), caches, the RoPE tables, the block table and the
  // activations (sized for the prefill; a decode step uses their first B rows).
  void load(runtime::Device& d) {
    stream_ = d.create_stream();
    const float random = NAN;
    embed_ = weight(d, "model.embed_tokens.weight", {V, H}, random, false);
    weight_bytes_ += B * H * es_;  // a decode step gathers B rows of it
    for (std::uint32_t l = 0; l < cfg_.layers; ++l) {
      LayerWeights& w = layers_[l];
      const std::string p = "model.layers." + num(l) + ".";
      w.ln1 = weight(d, p + "input_layernorm.weight", {H}, 1.0f);
      w.wq = weight(d, p + "self_attn.q_proj.weight", {N * D, H}, random);
      w.wk = weight(d, p + "self_attn.k_proj.weight", {KVN * D, H}, random);
      w.wv = weight(d, p + "self_attn.v_proj.weight", {KVN * D, H}, random);
      if (cfg_.qkv_bias) {
        w.bq = weight(d, p + "self_attn.q_proj.bias", {N * D}, 0.0f);
        w.bk = weight(d, p + "self_attn.k_proj.bias", {KVN * D}, 0.0f);
        w.bv = weight(d, p + "self_attn.v_proj.bias", {KVN * D}, 0.0f);
      }
      w.wo = weight(d, p + "self_attn.o_proj.weight", {H, N * D}, random);
      w.ln2 = weight(d, p + "post_attention_layernorm.weight", {H}, 1.0f);
      w.wgate = weight(d, p + "mlp.gate_proj.weight", {I, H}, random);
      w.wup = weight(d, p + "mlp.up_proj.weight", {I, H}, random);
      w.wdown = weight(d, p + "mlp.down_proj.weight", {H, I}, random);
      w.k_cache = alloc(d, pages_ * page_ * KVN * D * es_);
      w.v_cache = alloc(d, pages_ * page_ * KVN * D * es_);
      cache_bytes_ += 2 * pages_ * page_ * KVN * D * es_;
    }
    norm_ = weight(d, "model.norm.weight", {H}, 1.0f);
    head_ = cfg_.tie_embeddings ? embed_ : weight(d, "lm_head.weight", {V, H}, random);
    if (cfg_.tie_embeddings) weight_bytes_ += V * H * es_;
    upload_tables(d);
    const std::uint64_t rows = B * P;
    for (std::uint64_t* buf : {&a_.x, &a_.h, &a_.n, &a_.proj}) *buf = alloc(d, rows * H * es_);
    for (std::uint64_t* buf : {&a_.q, &a_.qr, &a_.o}) *buf = alloc(d, rows * N * D * es_);
    for (std::uint64_t* buf : {&a_.k, &a_.kr, &a_.v}) *buf = alloc(d, rows * KVN * D * es_);
    for (std::uint64_t* buf : {&a_.gate, &a_.up, &a_.act}) *buf = alloc(d, rows * I * es_);
    a_.last = alloc(d, B * H * es_);
    a_.logits = alloc(d, B * V * es_);
    a_.ids = alloc(d, rows * 4);
    a_.slots = alloc(d, rows * 4);
    a_.lastidx = alloc(d, B * 4);
    d.synchronize(stream_);
  }

  // RoPE: row p of cos and sin is cos(p f), sin(p f) for f = theta^(-2i / D), the D / 2 frequencies twice
  // (HuggingFace's rotate_half form). The block table: sequence b's i-th page is page b cols + i.
  void upload_tables(runtime::Device& d) {
    const std::uint64_t positions = P + steps_;
    std::vector<float> c(positions * D), s(positions * D);
    for (std::uint64_t pos = 0; pos < positions; ++pos)
      for (std::uint64_t i = 0; i < D; ++i) {
        const double f = std::pow(cfg_.rope_theta, -2.0 * static_cast<double>(i % (D / 2)) / static_cast<double>(D));
        c[pos * D + i] = static_cast<float>(std::cos(static_cast<double>(pos) * f));
        s[pos * D + i] = static_cast<float>(std::sin(static_cast<double>(pos) * f));
      }
    cos_ = alloc(d, positions * D * es_);
    sin_ = alloc(d, positions * D * es_);
    std::vector<std::int32_t> tbl(B * cols_);
    for (std::uint64_t i = 0; i < tbl.size(); ++i) tbl[i] = static_cast<std::int32_t>(i);
    table_ = alloc(d, tbl.size() * 4);
    cos_bytes_ = src_.encode(c);
    sin_bytes_ = src_.encode(s);
    table_host_ = tbl;
    d.memcpy_async(cos_, cos_bytes_.data(), cos_bytes_.size(), stream_);
    d.memcpy_async(sin_, sin_bytes_.data(), sin_bytes_.size(), stream_);
    d.memcpy_async(table_, table_host_.data(), table_host_.size() * 4, stream_);
  }

  // One forward pass over S new tokens per sequence: the prefill (S = P, FlashAttention over the prompt) or a
  // decode step (S = 1, paged attention over the cache), from the token ids to the sampled tokens on the host.
  void forward(runtime::Device& d, std::uint64_t S, std::uint64_t pos0, const std::vector<std::int32_t>& ids) {
    const std::uint64_t M = B * S;
    std::vector<std::int32_t> slots(M), lastidx(B);
    for (std::uint64_t b = 0; b < B; ++b) {
      for (std::uint64_t i = 0; i < S; ++i) slots[b * S + i] = static_cast<std::int32_t>(b * cols_ * page_ + pos0 + i);
      lastidx[b] = static_cast<std::int32_t>(b * S + S - 1);
    }
    d.memcpy_async(a_.ids, functional_ ? ids.data() : nullptr, M * 4, stream_);
    d.memcpy_async(a_.slots, functional_ ? slots.data() : nullptr, M * 4, stream_);
    if (S > 1) d.memcpy_async(a_.lastidx, functional_ ? lastidx.data() : nullptr, B * 4, stream_);
    run_.launch(d, stream_, "gather", {{"shape", shape({V, H})}, {"indices", num(M)}}, {embed_, a_.ids, a_.x});
    // The layers' launches: layer 1's recorded, those of layers 2.. replaying them one for one when replay is on.
    std::vector<std::uint32_t> recorded;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      std::size_t nth = 0;
      auto go = [&](const std::string& op, const ops::Params& p, const std::vector<std::uint64_t>& buf) {
        const std::uint32_t of = replay_ && l >= 2 ? recorded.at(nth) : Launcher::kSimulate;
        const std::uint32_t id = run_.launch(d, stream_, op, p, buf, of);
        if (l == 1) recorded.push_back(id);
        ++nth;
      };
      layer_pass(layers_[l], S, pos0, go);
    }
    sample(d, S);
  }

  // One layer's 16 launches, each through `go`.
  template <class Go>
  void layer_pass(const LayerWeights& w, std::uint64_t S, std::uint64_t pos0, Go& go) const {
    const std::uint64_t M = B * S;
    const ops::Params norm{{"shape", shape({M, H})}, {"eps", eps_}};
    auto matmul = [&](std::uint64_t in, std::uint64_t wt, std::uint64_t bias, std::uint64_t out, std::uint64_t n,
                      std::uint64_t k) {
      ops::Params p{{"M", num(M)}, {"N", num(n)}, {"K", num(k)}, {"trans_b", "1"}};
      std::vector<std::uint64_t> buf{in, wt};
      if (bias) {
        p["bias"] = "1";
        buf.push_back(bias);
      }
      buf.push_back(out);
      go("matmul", p, buf);
    };
    const std::uint64_t cs = pos0 * D * es_;  // the RoPE rows of the first new position
    go("rmsnorm", norm, {a_.x, w.ln1, a_.n});
    matmul(a_.n, w.wq, w.bq, a_.q, N * D, H);
    matmul(a_.n, w.wk, w.bk, a_.k, KVN * D, H);
    matmul(a_.n, w.wv, w.bv, a_.v, KVN * D, H);
    go("rope", {{"shape", shape({B, S, N, D})}, {"layout", "bsnd"}}, {a_.q, cos_ + cs, sin_ + cs, a_.qr});
    go("rope", {{"shape", shape({B, S, KVN, D})}, {"layout", "bsnd"}}, {a_.k, cos_ + cs, sin_ + cs, a_.kr});
    go("reshape_and_cache",
       {{"T", num(M)}, {"KVN", num(KVN)}, {"D", num(D)}, {"page", num(page_)}, {"pages", num(pages_)}},
       {a_.kr, a_.v, w.k_cache, w.v_cache, a_.slots, w.k_cache, w.v_cache});
    const ops::Params heads{{"B", num(B)}, {"N", num(N)}, {"KVN", num(KVN)}, {"D", num(D)}};
    if (S > 1) {
      ops::Params p = heads;
      p.insert({{"S", num(S)}, {"causal", "1"}, {"layout", "bsnd"}});
      go("flash_attention", p, {a_.qr, a_.kr, a_.v, a_.o});
    } else {
      ops::Params p = heads;
      p.insert({{"kv_len", num(pos0 + 1)}, {"page", num(page_)}, {"pages", num(pages_)}, {"table_cols", num(cols_)}});
      go("paged_attention", p, {a_.qr, w.k_cache, w.v_cache, table_, a_.o});
    }
    matmul(a_.o, w.wo, 0, a_.proj, H, N * D);
    go("add", {{"shape", shape({M, H})}}, {a_.x, a_.proj, a_.h});
    go("rmsnorm", norm, {a_.h, w.ln2, a_.n});
    // The MLP: silu(x Wgate^T) * (x Wup^T) in one vector pass (a SwiGLU row of 2I does not fit the UB at 7B).
    matmul(a_.n, w.wgate, 0, a_.gate, I, H);
    matmul(a_.n, w.wup, 0, a_.up, I, H);
    go("fused_elementwise", {{"expr", "mul(silu(x0),x1)"}, {"shape", shape({M, I})}}, {a_.gate, a_.up, a_.act});
    matmul(a_.act, w.wdown, 0, a_.proj, H, I);
    go("add", {{"shape", shape({M, H})}}, {a_.h, a_.proj, a_.x});
  }

  // The final norm, each sequence's last row (prefill), the LM head, the logits to the host, greedy sampling there
  // (each sequence's most likely token, the first of equal ones).
  void sample(runtime::Device& d, std::uint64_t S) {
    const std::uint64_t M = B * S;
    run_.launch(d, stream_, "rmsnorm", {{"shape", shape({M, H})}, {"eps", eps_}}, {a_.x, norm_, a_.n});
    std::uint64_t last = a_.n;
    if (S > 1) {
      run_.launch(d, stream_, "gather", {{"shape", shape({M, H})}, {"indices", num(B)}}, {a_.n, a_.lastidx, a_.last});
      last = a_.last;
    }
    run_.launch(d, stream_, "matmul", {{"M", num(B)}, {"N", num(V)}, {"K", num(H)}, {"trans_b", "1"}},
                {last, head_, a_.logits});
    std::vector<std::uint8_t> out(functional_ ? B * V * es_ : 0);
    d.memcpy_async(functional_ ? out.data() : nullptr, a_.logits, B * V * es_, stream_);
    d.synchronize();  // the device-wide form is an API call of its own: the phase's host span ends with the logits
    if (!functional_) return;
    for (std::uint64_t i = 0; i < B * V; ++i) logits_[i] = hw::isa::load_float(&out[i * es_], dt_);
    for (std::uint64_t b = 0; b < B; ++b) {
      const auto row = logits_.begin() + static_cast<std::ptrdiff_t>(b * V);
      next_[b] = static_cast<std::int32_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(V)) - row);
    }
  }

  void record() {
    if (!functional_) return;
    for (std::uint64_t b = 0; b < B; ++b) result_.tokens[b].push_back(next_[b]);
    result_.logits.push_back(logits_);
  }

  // A phase's keys (docs/metrics.md) from its call's report.
  static nlohmann::json phase(const nlohmann::json& r) {
    const double host_us = r["host"]["span_us"].get<double>();
    const double read = r["memory"]["hbm_read_bytes"].get<double>();
    return nlohmann::json{{"host_us", host_us},
                          {"device_us", r["time_us"]},
                          {"kernels", kernel_totals(r["tasks"])},
                          {"launches", r["host"]["api_calls"]},
                          {"hbm_read_bytes", r["memory"]["hbm_read_bytes"]},
                          {"hbm_write_bytes", r["memory"]["hbm_write_bytes"]},
                          {"hbm_read_GBps", host_us > 0 ? read / host_us / 1e3 : 0.0}};
  }

  nlohmann::json report(const nlohmann::json& load, const nlohmann::json& prefill,
                        const std::vector<nlohmann::json>& decode) const {
    nlohmann::json dec;
    dec["model"] = {{"architecture", cfg_.architecture},
                    {"config", cfg_.source},
                    {"layers", cfg_.layers},
                    {"hidden", cfg_.hidden},
                    {"heads", cfg_.heads},
                    {"kv_heads", cfg_.kv_heads},
                    {"head_dim", cfg_.head_dim},
                    {"intermediate", cfg_.intermediate},
                    {"vocab", cfg_.vocab},
                    {"parameters", cfg_.parameters()},
                    {"dtype", std::string(hw::isa::dtype_name(dt_))},
                    {"weights", !functional_        ? "not materialised (timing-only)"
                                : src_.from_files() ? "safetensors from " + opts_.weights_dir
                                                    : std::string("seeded random")}};
    dec["batch"] = B;
    dec["prompt_len"] = P;
    dec["steps"] = steps_;
    dec["page"] = page_;
    dec["kv_cache_bytes"] = cache_bytes_;
    dec["layers_simulated"] = replay_ ? 2 : cfg_.layers;
    dec["layers_replayed"] = replay_ ? cfg_.layers - 2 : 0;
    dec["weight_bytes_per_step"] = weight_bytes_;
    dec["load_us"] = load["host"]["span_us"];
    dec["prefill"] = phase(prefill);
    dec["ttft_us"] = dec["prefill"]["host_us"];
    nlohmann::json per_step = nlohmann::json::array();
    double total = 0, read = 0, device = 0;
    for (std::size_t i = 0; i < decode.size(); ++i) {
      nlohmann::json s = phase(decode[i]);
      s["step"] = i;
      total += s["host_us"].get<double>();
      device += s["device_us"].get<double>();
      read += s["hbm_read_bytes"].get<double>();
      per_step.push_back(std::move(s));
    }
    dec["decode_steps"] = per_step;
    if (!decode.empty()) {
      const double tpot = total / static_cast<double>(decode.size());
      const double peak = session_.chip().hbm.peak_bytes_per_second();
      dec["tpot_us"] = tpot;
      dec["decode_weight_GBps"] = static_cast<double>(weight_bytes_) / tpot / 1e3;
      dec["decode_weight_hbm_fraction"] = static_cast<double>(weight_bytes_) / (tpot * 1e-6) / peak;
      // Replayed layers move no data through the memory model: its counters then cover the simulated layers only.
      dec["decode_hbm_read_GBps"] = replay_ ? nlohmann::json() : nlohmann::json(read / total / 1e3);
      dec["decode_hbm_read_fraction"] = replay_ ? nlohmann::json() : nlohmann::json(read / (total * 1e-6) / peak);
      dec["decode_device_busy_fraction"] = device / total;
    }
    if (functional_) dec["tokens"] = result_.tokens;
    return dec;
  }

  Session& session_;
  const LlmConfig& cfg_;
  const GenerateOptions& opts_;
  const bool functional_;
  // The run's sizes: batch, prompt, decode steps; the model's hidden, intermediate, heads, KV heads, head size,
  // vocabulary (the usual one-letter names).
  const std::uint64_t B, P, steps_, H, I, N, KVN, D, V, page_;  // NOLINT(readability-identifier-naming)
  const DType dt_;
  const std::uint64_t es_;
  std::uint64_t cols_ = 0, pages_ = 0;  // pages per sequence, pages per cache
  std::string eps_;
  bool replay_ = false;
  WeightSource src_;
  Launcher run_;
  std::vector<LayerWeights> layers_;
  std::uint64_t embed_ = 0, norm_ = 0, head_ = 0, cos_ = 0, sin_ = 0, table_ = 0;
  std::vector<std::uint8_t> cos_bytes_, sin_bytes_;  // host copies kept until the copies in are done
  std::vector<std::int32_t> table_host_;
  struct {
    std::uint64_t x, h, n, q, k, v, qr, kr, o, proj, gate, up, act, last, logits, ids, slots, lastidx;
  } a_{};
  std::uint64_t weight_bytes_ = 0, cache_bytes_ = 0;  // a decode step's weight reads; the KV cache
  runtime::Stream stream_{};
  std::vector<std::int32_t> next_;  // the tokens the next step feeds
  std::vector<float> logits_;
  std::vector<std::uint64_t> allocs_;  // every device buffer, freed at the end
  GenerateResult result_;
};

}  // namespace

GenerateResult generate(Session& session, const LlmConfig& cfg, const GenerateOptions& opts) {
  return Generator(session, cfg, opts).run();
}

}  // namespace npusim::stack::framework
