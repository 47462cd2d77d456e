// The operator library's framework: an op is a registry entry with shape and dtype inference, a host tiling
// function that reads the chip config, a device kernel written against firmware/kernel, and a CPU reference, all
// taking the op's typed call (calls.hpp) and its operands' descriptions. Calling an op goes through the runtime
// like aclnn: plan (tiling) -> launch on a stream.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/util/error.hpp"
#include "hw/isa/dtype.hpp"
#include "stack/ops/calls.hpp"
#include "stack/runtime/runtime.hpp"

namespace npusim::stack::ops {

// A call as text: -p KEY=VALUE on the command line, keyword arguments in Python. It holds the call's attributes
// (parsed once into the typed Call) and, for `npusim op`, the operands' shapes (-p shape=..., M, N, K...).
using Params = std::map<std::string, std::string>;
std::string shape_string(const Shape& s);
// "4x32x64" -> {4, 32, 64}; throws InputError naming the text.
Shape parse_shape(const std::string& text);
std::uint64_t elements(const Shape& s);
// The most elements a tensor may have: below 2^53, element counts, byte sizes (up to 8 B an element) and doubles of
// them never wrap (a count that wrapped to 0 divided by zero, issue 23). parse_shape and the graph lowering check it.
inline constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 53;
// A shape a typed call carries: throws InputError naming `what` when it is empty, has a 0 dim or more than
// kMaxElements elements.
void check_shape(const Shape& s, const std::string& what);
// "fp16", "bf16", "fp32" -> DType; throws InputError.
// fp16, bf16, fp32; with `integers`, also int32 and int8 (a bool is an int8 of 0 or 1).
hw::isa::DType parse_dtype(const std::string& text, bool integers = false);

// -p parameters. Each throws InputError naming the parameter and what it accepts.
// An integer in 0..max, or `def` when absent.
std::uint32_t param_uint(const std::map<std::string, std::string>& p, const std::string& key, std::uint32_t def,
                         std::uint32_t max);
// A finite number, positive (or non-negative with allow_zero), or `def` when absent.
double param_real(const std::map<std::string, std::string>& p, const std::string& key, double def, bool allow_zero);
// One or `n` comma-separated integers in min..max (e.g. stride=2 or stride=2,1: one value stands for all n), or n
// times `def` when absent.
std::vector<std::uint32_t> param_uints(const std::map<std::string, std::string>& p, const std::string& key,
                                       std::size_t n, std::uint32_t def, std::uint32_t min, std::uint32_t max);
// A window's `kernel`, `stride`, `dilation` (one value or h,w) and `pad` (one value or top,left,bottom,right, ONNX's
// order) into a call with those fields (Conv2dCall, PoolCall).
template <class Call>
void parse_window(const std::map<std::string, std::string>& p, Call& c, std::uint32_t max_kernel,
                  std::uint32_t max_stride) {
  const auto k = param_uints(p, "kernel", 2, c.kh, 1, max_kernel), s = param_uints(p, "stride", 2, 1, 1, max_stride);
  const auto d = param_uints(p, "dilation", 2, 1, 1, 255), pad = param_uints(p, "pad", 4, 0, 0, 255);
  c.kh = k[0];
  c.kw = k[1];
  c.sh = s[0];
  c.sw = s[1];
  c.dh = d[0];
  c.dw = d[1];
  c.pad_top = pad[0];
  c.pad_left = pad[1];
  c.pad_bottom = pad[2];
  c.pad_right = pad[3];
}
// ONNX Resize's names of a coordinate transformation and of a nearest rounding (resize.cpp, for the op's text form
// and the graph's lowering alike); InputError "`what` is not one of ..." for others.
ResizeCoord resize_coord(const std::string& name, const std::string& what);
ResizeNearest resize_nearest(const std::string& name, const std::string& what);
// The required `shape` parameter, e.g. -p shape=4x1024.
std::vector<std::uint64_t> param_shape(const std::map<std::string, std::string>& p);

struct TensorDesc {
  Shape shape;
  hw::isa::DType dtype = hw::isa::DType::kFp16;
  std::uint64_t bytes() const { return elements(shape) * hw::isa::dtype_bytes(dtype); }
};

// A planned call: the output descriptions, the launch, and the tiling chosen (reported under "tiling").
struct OpPlan {
  std::vector<TensorDesc> outputs;
  fw::kernel::KernelType type = fw::kernel::KernelType::kVector;
  std::uint32_t block_dim = 1;
  std::map<std::string, double> tiling;
  // Device scratch the kernel needs besides its inputs and outputs (aclnn's "workspace size"); passed last.
  std::uint64_t workspace_bytes = 0;
  // Floating-point operations of the call (0: not a compute op), for TFLOPS.
  double flops = 0;
  // A lower bound on the instructions the launch will issue, when the tiling can tell (0: not estimated). plan_op
  // refuses a call whose bound passes sim.max_instructions, before anything is allocated or run.
  std::uint64_t min_instructions = 0;
  // The compulsory traffic in bytes when the kernel does not read every input whole (a gather reads only the rows
  // it picks); unset: every input once and every output once.
  std::optional<std::uint64_t> compulsory_bytes;
  // Per output, when set: the input whose buffer it is (the op updates that tensor in place, as reshape_and_cache
  // writes a KV cache); -1 or absent: a buffer of its own.
  std::vector<int> in_place;
  // The kernel for device buffers: inputs then outputs, in the order of the descriptions.
  std::function<std::function<void()>(const std::vector<std::uint64_t>& buffers)> kernel;  // + workspace
};

// Host-side values for the CPU reference: each tensor as fp32 (computed from the same fp16/bf16 inputs).
using HostTensor = std::vector<float>;

// One key of an op's text form (-p KEY=VALUE, a Python keyword), for `npusim op --help`, errors and list_ops(). The
// table is kept equal to what the op's parse and inputs do by tests/stack/ops/op_params_test.cpp.
struct OpParam {
  std::string key;
  // What the op takes when the key is absent, as help shows it: a value in the key's text form ("1", "bnsd"; words
  // may follow after a space: "0 (chosen by the tiling)"), another key's name (KVN: N's value), or a rule in
  // parentheses ("(1/sqrt(D))"). Empty: the key is required.
  std::string def;
  bool required() const { return def.empty(); }
};
inline constexpr const char* kRequired = "";  // OpParam::def of a required key

struct OpDef {
  std::string name;
  std::string summary;
  std::vector<OpParam> params;  // the keys of the text form
  // The text form's attributes as the op's typed call; throws InputError naming the key and what it accepts.
  std::function<Call(const Params& params)> parse;
  // The operands the text form describes (its shapes) in the dtype, for `npusim op` and the Python ops.
  std::function<std::vector<TensorDesc>(const Params& params, hw::isa::DType)> inputs;
  // Shape/dtype inference and tiling for the chip; throws InputError for shapes the op cannot take.
  std::function<OpPlan(const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip)> plan;
  // The CPU reference in fp32.
  std::function<std::vector<HostTensor>(const std::vector<TensorDesc>& in, const Call& call,
                                         const std::vector<HostTensor>& values)>
      reference;
  // Accumulation error the output may carry beyond one rounding to its dtype, as an absolute tolerance added to
  // the per-dtype one (e.g. a sum of R terms in fp32); none when unset.
  std::function<double(const std::vector<TensorDesc>& in, const Call& call)> extra_atol;
  // Range of the random values of each input (default [-1, 1)); e.g. a divisor kept away from 0.
  std::vector<std::pair<float, float>> input_ranges;
  // The same from the operands' shapes (e.g. indices within a table), when set; it takes precedence.
  std::function<std::vector<std::pair<float, float>>(const std::vector<TensorDesc>& in)> ranges_of;
  // Whether int32 / int8 operands are taken (data movement, gather, fused_elementwise); the others compute in
  // float and refuse them (plan_op).
  bool takes_integers = false;
  // Integer inputs whose random values (npusim op --check) must be distinct, e.g. cache slots two tokens must not
  // share.
  std::vector<std::size_t> distinct_inputs;
};

// op.plan after the checks every op shares: integer operands only for an op that takes them.
OpPlan plan_op(const OpDef& op, const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip);

// The typed call of a text form: a key the op does not take is refused (naming the keys it takes), then op.parse.
Call parse_call(const OpDef& op, const Params& params);

// The call as the alternative an op takes; a call of another kind is refused naming both (a C++ caller's mistake,
// reported as bad input rather than undefined behaviour).
template <class T>
const T& call_as(const Call& call, const std::string& op) {
  if (const T* c = std::get_if<T>(&call)) return *c;
  throw InputError("op " + op + " takes a call of type " + T::kName + ", given " + call_name(call));
}

const std::vector<OpDef>& all_ops();
// The name an op's kernel carries in traces and task lists of a graph run: FlashAttention, LayerNorm, MatMul,
// ReduceSum... (CamelCase of the op name, with the usual spellings of the norms and gates).
std::string kernel_name(const std::string& op);
const OpDef* find_op(const std::string& name);

}  // namespace npusim::stack::ops
