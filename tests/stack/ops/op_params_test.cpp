// Each op's parameter table (OpDef::params, what `npusim op --help` and npusim.list_ops() show) against what the
// op's parse and inputs do: the required keys alone make a call the op plans, leaving out any one of them is refused,
// and a default the table states as a value means what leaving the key out means (same operands, plan and CPU
// reference outputs, bit for bit). A parser whose default moved, or a key that became required, fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {
namespace {

using hw::isa::DType;

// One small call per op, giving exactly its required keys (as a user writes them on the command line).
const std::map<std::string, Params>& examples() {
  static const std::map<std::string, Params> e = [] {
    std::map<std::string, Params> m = {
        {"matmul", {{"M", "32"}, {"N", "48"}, {"K", "64"}}},
        {"flash_attention", {{"B", "1"}, {"N", "2"}, {"S", "64"}, {"D", "64"}}},
        {"paged_attention", {{"B", "2"}, {"N", "4"}, {"D", "64"}, {"kv_len", "100"}}},
        {"conv2d", {{"C", "16"}, {"H", "8"}, {"W", "8"}, {"cout", "16"}}},
        {"trans_data", {{"shape", "1x16x4x4"}, {"to", "5hd"}}},
        {"max_pool", {{"shape", "1x1x8x8x16"}}},
        {"avg_pool", {{"shape", "1x1x8x8x16"}}},
        {"resize", {{"shape", "1x2x8x8"}, {"size", "16x12"}}},
        {"rope", {{"shape", "2x16x64"}}},
        {"rope_interleaved", {{"shape", "2x16x64"}}},
        {"cast", {{"shape", "4x64"}, {"to", "fp32"}}},
        {"transpose", {{"shape", "4x8x16"}}},
        {"concat", {{"shapes", "4x8,6x8"}}},
        {"split", {{"shape", "4x64"}, {"sizes", "1,3"}}},
        {"expand", {{"shape", "1x64"}, {"to", "4x64"}}},
        {"gather", {{"shape", "16x32"}, {"indices", "4"}}},
        {"reshape_and_cache", {{"T", "4"}, {"KVN", "2"}, {"D", "64"}, {"pages", "4"}}},
        {"fused_elementwise", {{"expr", "add(mul(x0,x1),x0)"}, {"shape", "4x64"}}},
    };
    for (const char* name :
         {"add",           "sub",     "mul",        "div",         "softmax",    "log_softmax", "layernorm",
          "add_layernorm", "rmsnorm", "swiglu",     "relu",        "gelu",       "gelu_tanh",   "silu",
          "exp",           "log",     "sqrt",       "abs",         "neg",        "reciprocal",  "sigmoid",
          "tanh",          "erf",     "reduce_sum", "reduce_mean", "reduce_max", "cumsum",      "slice"})
      m[name] = {{"shape", "4x64"}};
    return m;
  }();
  return e;
}

const config::ChipConfig& chip() {
  static const config::LoadedConfig c = config::load_config("910b");
  return c.chip;
}

// What a call does, as far as a caller can see: its operands, its plan and its CPU reference's outputs on seeded
// random values.
struct Outcome {
  std::vector<std::pair<Shape, DType>> inputs, outputs;
  std::map<std::string, double> tiling;
  std::uint32_t block_dim = 0;
  double flops = 0;
  std::uint64_t workspace = 0;
  std::vector<HostTensor> reference;
};

Outcome outcome(const OpDef& op, const Params& params) {
  Outcome o;
  const Call call = parse_call(op, params);
  const std::vector<TensorDesc> in = op.inputs(params, DType::kFp16);
  const OpPlan plan = plan_op(op, in, call, chip());
  for (const TensorDesc& t : in) o.inputs.emplace_back(t.shape, t.dtype);
  for (const TensorDesc& t : plan.outputs) o.outputs.emplace_back(t.shape, t.dtype);
  o.tiling = plan.tiling;
  o.block_dim = plan.block_dim;
  o.flops = plan.flops;
  o.workspace = plan.workspace_bytes;
  std::mt19937 rng(7);
  const auto ranges = op.ranges_of ? op.ranges_of(in) : op.input_ranges;
  std::vector<HostTensor> values;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto [lo, hi] = i < ranges.size() ? ranges[i] : std::make_pair(-1.0f, 1.0f);
    // Integer operands (indices, slots, a block table) take whole values in range; distinct ones count up.
    const bool whole = !hw::isa::is_float(in[i].dtype);
    std::uniform_real_distribution<float> u(lo, hi);
    HostTensor v(elements(in[i].shape));
    for (std::size_t k = 0; k < v.size(); ++k) {
      const float x = u(rng);
      v[k] = whole ? static_cast<float>(std::floor(x)) : x;
    }
    if (whole && std::count(op.distinct_inputs.begin(), op.distinct_inputs.end(), i))
      for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k);
    values.push_back(std::move(v));
  }
  o.reference = op.reference(in, call, values);
  return o;
}

// The InputError message of a call with these parameters, "" when parse, inputs and plan all take it.
std::string refusal(const OpDef& op, const Params& params) {
  try {
    (void)outcome(op, params);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(OpParams, EveryOpHasAnExampleGivingExactlyItsRequiredKeys) {
  std::set<std::string> seen;
  for (const OpDef& op : all_ops()) {
    seen.insert(op.name);
    const auto it = examples().find(op.name);
    ASSERT_NE(it, examples().end()) << op.name << " has no example here: add one with its required keys";
    std::set<std::string> required, given;
    for (const OpParam& p : op.params)
      if (p.required()) required.insert(p.key);
    for (const auto& kv : it->second) given.insert(kv.first);
    EXPECT_EQ(required, given) << op.name;
    std::set<std::string> keys;
    for (const OpParam& p : op.params)
      EXPECT_TRUE(keys.insert(p.key).second) << op.name << " lists " << p.key << " twice";
  }
  for (const auto& kv : examples()) EXPECT_TRUE(seen.count(kv.first)) << "no op " << kv.first;
}

TEST(OpParams, TheRequiredKeysAloneMakeACallTheOpPlans) {
  for (const OpDef& op : all_ops()) EXPECT_EQ(refusal(op, examples().at(op.name)), "") << op.name;
}

TEST(OpParams, LeavingOutARequiredKeyIsRefused) {
  for (const OpDef& op : all_ops()) {
    for (const OpParam& p : op.params) {
      if (!p.required()) continue;
      Params params = examples().at(op.name);
      params.erase(p.key);
      EXPECT_NE(refusal(op, params), "") << op.name << " ran without its required " << p.key;
    }
  }
}

// The value a default stands for: the text before a space ("0 (chosen by the tiling)": 0), another key's value
// that is required (KVN=N: the example's N; resize's mode=nearest is a value, its `nearest` key being optional); none
// for a rule in words ("(1/sqrt(D))").
std::optional<std::string> default_value(const OpDef& op, const OpParam& p, const Params& example) {
  if (p.def.empty() || p.def[0] == '(') return std::nullopt;
  const std::string value = p.def.substr(0, p.def.find(' '));
  for (const OpParam& q : op.params)
    if (q.key == value && q.required()) return example.at(q.key);
  return value;
}

TEST(OpParams, EachStatedDefaultMeansWhatLeavingTheKeyOutMeans) {
  int compared = 0;
  for (const OpDef& op : all_ops()) {
    const Params& example = examples().at(op.name);
    const Outcome absent = outcome(op, example);
    for (const OpParam& p : op.params) {
      const std::optional<std::string> value = default_value(op, p, example);
      if (!value) continue;
      Params params = example;
      params[p.key] = *value;
      const std::string what = op.name + " -p " + p.key + "=" + *value;
      Outcome given;
      try {
        given = outcome(op, params);
      } catch (const InputError& e) {
        ADD_FAILURE() << what << " is refused: " << e.what();
        continue;
      }
      EXPECT_EQ(given.inputs, absent.inputs) << what;
      EXPECT_EQ(given.outputs, absent.outputs) << what;
      EXPECT_EQ(given.tiling, absent.tiling) << what;
      EXPECT_EQ(given.block_dim, absent.block_dim) << what;
      EXPECT_EQ(given.flops, absent.flops) << what;
      EXPECT_EQ(given.workspace, absent.workspace) << what;
      EXPECT_EQ(given.reference, absent.reference) << what;
      ++compared;
    }
  }
  EXPECT_GT(compared, 50);  // most defaults are values
}

// The check above can fail: a value other than the default changes the outcome (eps into LayerNorm's outputs, the
// pool's kernel into its output shape, KVN into the operands).
TEST(OpParams, AValueOtherThanTheDefaultChangesTheOutcome) {
  const std::vector<std::pair<std::string, std::pair<std::string, std::string>>> cases = {
      {"layernorm", {"eps", "1e-6"}},
      {"max_pool", {"kernel", "3"}},
      {"flash_attention", {"KVN", "1"}},
      {"matmul", {"act", "relu"}},
      {"cumsum", {"axis", "0"}}};
  for (const auto& [name, kv] : cases) {
    const OpDef& op = *find_op(name);
    Params params = examples().at(name);
    const Outcome absent = outcome(op, params);
    params[kv.first] = kv.second;
    const Outcome given = outcome(op, params);
    EXPECT_TRUE(given.inputs != absent.inputs || given.outputs != absent.outputs || given.reference != absent.reference)
        << name << " -p " << kv.first << "=" << kv.second << " changed nothing";
  }
}

}  // namespace
}  // namespace npusim::stack::ops
