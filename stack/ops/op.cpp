#include "stack/ops/op.hpp"

#include <sstream>

#include "common/util/error.hpp"

namespace npusim::stack::ops {

std::vector<OpDef> elementwise_ops();
std::vector<OpDef> matmul_ops();
std::vector<OpDef> attention_ops();
std::vector<OpDef> rowwise_ops();
std::vector<OpDef> unary_ops();
std::vector<OpDef> reduce_ops();
std::vector<OpDef> transpose_ops();

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
      throw InputError("shape '" + text + "': '" + part + "' is not a positive dimension (write e.g. 4x1024)");
    }
    s.push_back(v);
  }
  if (s.empty()) throw InputError("shape '" + text + "' has no dimensions");
  return s;
}

std::uint64_t elements(const Shape& s) {
  std::uint64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

hw::isa::DType parse_dtype(const std::string& text) {
  if (text == "fp16") return hw::isa::DType::kFp16;
  if (text == "bf16") return hw::isa::DType::kBf16;
  if (text == "fp32") return hw::isa::DType::kFp32;
  throw InputError("--dtype '" + text + "' is not one of fp16, bf16, fp32");
}

const std::vector<OpDef>& all_ops() {
  static const std::vector<OpDef> ops = [] {
    std::vector<OpDef> v;
    for (auto& op : elementwise_ops()) v.push_back(std::move(op));
    for (auto& op : matmul_ops()) v.push_back(std::move(op));
    for (auto& op : attention_ops()) v.push_back(std::move(op));
    for (auto& op : rowwise_ops()) v.push_back(std::move(op));
    for (auto& op : unary_ops()) v.push_back(std::move(op));
    for (auto& op : reduce_ops()) v.push_back(std::move(op));
    for (auto& op : transpose_ops()) v.push_back(std::move(op));
    return v;
  }();
  return ops;
}

const OpDef* find_op(const std::string& name) {
  for (const OpDef& op : all_ops())
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace npusim::stack::ops
