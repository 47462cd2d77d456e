// The graph engine's op table (stack/graph/onnx_ops) against ONNX's own operator schemas (Debian's libonnx, the
// registry ONNX's checker and shape inference use): every default-domain op it lists exists, takes the inputs the
// table says at opset 17 (the form import adapts newer models to), and every attribute its rules read is one the op
// has at some opset (up to the newest: ops import does not adapt, such as Resize-19, reach the lowering as written).
#include <gtest/gtest.h>

#include <onnx/defs/schema.h>

#include <limits>
#include <map>
#include <set>
#include <string>

#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {
namespace {

constexpr int kOpset = 17;

// Ops whose table arity is wider than opset 17's on purpose: their older forms are read too.
const std::map<std::string, std::pair<std::size_t, std::size_t>>& older_forms() {
  static const std::map<std::string, std::pair<std::size_t, std::size_t>> m = {
      {"Unsqueeze", {1, 2}},  // opset 1-12: `axes` is an attribute and the op takes one input
      {"Upsample", {1, 2}},   // opset 7-8: `scales` is an attribute and the op takes one input
  };
  return m;
}

// Attributes ONNX added after opset 17, with the opset that added them (ONNX's Changelog.md): a libonnx older than
// that (Debian 12's knows opsets up to 17) cannot list them, a newer one must.
const std::map<std::pair<std::string, std::string>, int>& newer_attributes() {
  static const std::map<std::pair<std::string, std::string>, int> m = {
      {{"Resize", "antialias"}, 18},
      {{"Resize", "axes"}, 18},
      {{"Resize", "keep_aspect_ratio_policy"}, 18},
      {{"AveragePool", "dilations"}, 19},
  };
  return m;
}

std::size_t max_of(int max_input) {
  return max_input == std::numeric_limits<int>::max() ? kVariadic : static_cast<std::size_t>(max_input);
}

TEST(OpTableSchemas, ArityMatchesOnnxAtOpset17) {
  for (const OpInfo& op : op_table()) {
    if (!op.domain.empty()) continue;
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(op.type, kOpset, "");
    ASSERT_NE(s, nullptr) << op.type << " is not an ONNX op at opset " << kOpset;
    std::pair<std::size_t, std::size_t> want{static_cast<std::size_t>(s->min_input()), max_of(s->max_input())};
    if (const auto it = older_forms().find(op.type); it != older_forms().end()) want = it->second;
    EXPECT_EQ(op.min_inputs, want.first) << op.type;
    EXPECT_EQ(op.max_inputs, want.second) << op.type;
  }
}

TEST(OpTableSchemas, EveryAttributeReadIsOneTheOpHas) {
  for (const OpInfo& op : op_table()) {
    if (!op.domain.empty()) continue;
    std::set<std::string> known;
    // Up to the newest opset libonnx knows: import leaves the ops it does not adapt (Resize-18/19...) as they are.
    const int newest = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
    for (int v = 1; v <= newest; ++v)
      if (const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(op.type, v, ""))
        for (const auto& [name, attr] : s->attributes()) known.insert(name);
    for (const std::string& a : op.attributes) {
      const auto later = newer_attributes().find({op.type, a});
      if (later != newer_attributes().end() && later->second > newest) continue;
      EXPECT_TRUE(known.count(a)) << op.type << " has no attribute '" << a << "' at any opset";
    }
  }
}

}  // namespace
}  // namespace npusim::stack::graph::onnx_ops
