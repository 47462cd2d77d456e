#include "stack/ops/op.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <sstream>

#include "common/util/error.hpp"
#include "stack/ops/rows/row_ops.hpp"

namespace npusim::stack::ops {

std::vector<OpDef> elementwise_ops();
std::vector<OpDef> matmul_ops();
std::vector<OpDef> attention_ops();
std::vector<OpDef> paged_attention_ops();
std::vector<OpDef> conv_ops();
std::vector<OpDef> trans_data_ops();
std::vector<OpDef> pool_ops();
std::vector<OpDef> resize_ops();
std::vector<OpDef> unary_ops();
std::vector<OpDef> reduce_ops();
std::vector<OpDef> cumsum_ops();
std::vector<OpDef> transpose_ops();
std::vector<OpDef> fused_ops();
std::vector<OpDef> copy_ops();
std::vector<OpDef> gather_ops();
std::vector<OpDef> kv_cache_ops();

std::string shape_string(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "scalar" : out;
}

Shape parse_shape(const std::string& text) {
  Shape s;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, 'x');) {
    std::size_t pos = 0;
    std::uint64_t v = 0;
    try {
      if (part.empty() || part[0] == '-') throw std::invalid_argument(part);
      v = std::stoull(part, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != part.size() || v == 0) {
      std::string what = "shape '" + text + "': '";
      what += part;
      what += "' is not a positive dimension (write e.g. 4x1024)";
      throw InputError(what);
    }
    if (v > kMaxElements / elements(s))
      throw InputError("shape '" + text + "': more than 2^53 elements (" + std::to_string(kMaxElements) + ")");
    s.push_back(v);
  }
  if (s.empty()) throw InputError("shape '" + text + "' has no dimensions");
  return s;
}

void check_shape(const Shape& s, const std::string& what) {
  if (s.empty()) throw InputError(what + " is not given");
  std::uint64_t n = 1;
  for (auto d : s) {
    if (d == 0) throw InputError(what + " " + shape_string(s) + " has a 0 dimension");
    if (d > kMaxElements / n) throw InputError(what + " " + shape_string(s) + " has more than 2^53 elements");
    n *= d;
  }
}

std::uint64_t elements(const Shape& s) {
  std::uint64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

hw::isa::DType parse_dtype(const std::string& text, bool integers) {
  if (text == "fp16") return hw::isa::DType::kFp16;
  if (text == "bf16") return hw::isa::DType::kBf16;
  if (text == "fp32") return hw::isa::DType::kFp32;
  if (integers && text == "int32") return hw::isa::DType::kInt32;
  if (integers && (text == "int8" || text == "bool")) return hw::isa::DType::kInt8;
  if (integers) throw InputError("dtype '" + text + "' is not one of fp16, bf16, fp32, int32, int8, bool");
  throw InputError("--dtype '" + text + "' is not one of fp16, bf16, fp32");
}

std::uint32_t param_uint(const Params& p, const std::string& key, std::uint32_t def, std::uint32_t max) {
  const auto it = p.find(key);
  if (it == p.end()) return def;
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    if (!it->second.empty() && it->second[0] != '-') v = std::stoull(it->second, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != it->second.size() || v > max)
    throw InputError("parameter " + key + "='" + it->second + "' is not an integer in 0.." + std::to_string(max));
  return u32(v);
}

double param_real(const Params& p, const std::string& key, double def, bool allow_zero) {
  const auto it = p.find(key);
  if (it == p.end()) return def;
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != it->second.size() || !std::isfinite(v) || v < 0 || (v == 0 && !allow_zero))
    throw InputError("parameter " + key + "='" + it->second + "' is not a " + (allow_zero ? "non-negative" : "positive") + " number");
  return v;
}

std::vector<std::uint32_t> param_uints(const Params& p, const std::string& key, std::size_t n, std::uint32_t def,
                                       std::uint32_t min, std::uint32_t max) {
  const auto it = p.find(key);
  if (it == p.end()) return std::vector<std::uint32_t>(n, def);
  std::vector<std::uint32_t> v;
  std::size_t start = 0;
  while (start <= it->second.size()) {
    const std::size_t comma = std::min(it->second.find(',', start), it->second.size());
    const std::uint32_t x = param_uint({{key, it->second.substr(start, comma - start)}}, key, 0, max);
    if (x < min)
      throw InputError("parameter " + key + "='" + it->second + "': each value must be at least " +
                       std::to_string(min));
    v.push_back(x);
    start = comma + 1;
  }
  if (v.size() == 1) v.assign(n, v[0]);
  if (v.size() != n)
    throw InputError("parameter " + key + "='" + it->second + "' takes 1 or " + std::to_string(n) + " values");
  return v;
}

Shape param_shape(const Params& p) {
  const auto it = p.find("shape");
  if (it == p.end()) throw InputError("parameter 'shape' is required, e.g. -p shape=1024x1024");
  return parse_shape(it->second);
}

const char* call_name(const Call& c) {
  return std::visit([](const auto& v) { return std::decay_t<decltype(v)>::kName; }, c);
}

Call parse_call(const OpDef& op, const Params& params) {
  for (const auto& kv : params) {
    if (std::none_of(op.params.begin(), op.params.end(), [&](const OpParam& p) { return p.key == kv.first; })) {
      std::string known;
      for (const auto& p : op.params) known += (known.empty() ? "" : ", ") + p.key;
      throw InputError("op " + op.name + " has no parameter '" + kv.first + "' (it takes: " + known + ")");
    }
  }
  return op.parse(params);
}

const std::vector<OpDef>& all_ops() {
  static const std::vector<OpDef> ops = [] {
    std::vector<OpDef> v;
    for (auto& op : elementwise_ops()) v.push_back(std::move(op));
    for (auto& op : matmul_ops()) v.push_back(std::move(op));
    for (auto& op : attention_ops()) v.push_back(std::move(op));
    for (auto& op : paged_attention_ops()) v.push_back(std::move(op));
    for (auto& op : conv_ops()) v.push_back(std::move(op));
    for (auto& op : trans_data_ops()) v.push_back(std::move(op));
    for (auto& op : pool_ops()) v.push_back(std::move(op));
    for (auto& op : resize_ops()) v.push_back(std::move(op));
    for (auto& op : rows::row_ops()) v.push_back(std::move(op));
    for (auto& op : unary_ops()) v.push_back(std::move(op));
    for (auto& op : reduce_ops()) v.push_back(std::move(op));
    for (auto& op : cumsum_ops()) v.push_back(std::move(op));
    for (auto& op : transpose_ops()) v.push_back(std::move(op));
    for (auto& op : copy_ops()) v.push_back(std::move(op));
    for (auto& op : gather_ops()) v.push_back(std::move(op));
    for (auto& op : kv_cache_ops()) v.push_back(std::move(op));
    for (auto& op : fused_ops()) v.push_back(std::move(op));
    return v;
  }();
  return ops;
}

OpPlan plan_op(const OpDef& op, const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
  if (!op.takes_integers)
    for (std::size_t i = 0; i < in.size(); ++i)
      if (!hw::isa::is_float(in[i].dtype))
        throw InputError("op " + op.name + ": input " + std::to_string(i) + " is " +
                         std::string(hw::isa::dtype_name(in[i].dtype)) + "; it takes fp16, bf16 and fp32");
  OpPlan plan = op.plan(in, call, chip);
  if (plan.min_instructions > chip.sim.max_instructions) {
    throw InputError(
        "op " + op.name + ": at least " + std::to_string(plan.min_instructions) +
        " instructions to simulate, more than sim.max_instructions = " + std::to_string(chip.sim.max_instructions) +
        " (about 0.7 us and 30-60 B of host memory each; raise it with --set sim.max_instructions=N, or "
        "simulate a smaller shape)");
  }
  return plan;
}

std::string kernel_name(const std::string& op) {
  static const std::map<std::string, std::string> special = {{"matmul", "MatMul"},
                                                             {"conv2d", "Conv2D"},
                                                             {"layernorm", "LayerNorm"},
                                                             {"rmsnorm", "RMSNorm"},
                                                             {"swiglu", "SwiGLU"},
                                                             {"rope", "RoPE"},
                                                             {"add_layernorm", "AddLayerNorm"},
                                                             {"rope_interleaved", "RoPEInterleaved"},
                                                             {"silu", "SiLU"},
                                                             {"gelu_tanh", "GeluTanh"}};
  if (const auto it = special.find(op); it != special.end()) return it->second;
  std::string out;
  bool up = true;
  for (char c : op) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out;
}

const OpDef* find_op(const std::string& name) {
  for (const OpDef& op : all_ops())
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace npusim::stack::ops
