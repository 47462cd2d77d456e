// Lowering a graph to library op calls (issue 7, first step: no fusion passes yet): every node becomes one call of a
// `stack/ops` op, a view (Reshape, Flatten, Squeeze, Unsqueeze, Identity, keepdims: the same bytes under another
// shape), or a constant. Shapes must be static (bind symbolic dims at import). float32 MatMul/Gemm run on the Cube
// in fp16 (as CANN's default `allow_fp32_to_fp16`): activations are cast on the device, weights converted at
// compile time, the result cast back.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/config/chip_config.hpp"
#include "stack/graph/graph.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::graph {

// A device tensor of the program: a graph value or a temporary the lowering added.
struct ProgramTensor {
  std::string name;
  ops::TensorDesc desc;
  int alias = -1;                       // a view: the tensor whose buffer it shares
  std::vector<std::uint8_t> constant;   // bytes to upload before the first step (in desc.dtype)
  ElemType type = ElemType::kUndefined;  // the graph value's element type (int64 and bool are stored as int32, int8)
  bool rank0 = false;                    // a rank-0 graph value, held as one element
};

struct Step {
  std::string node;  // the graph node it comes from
  std::string op;    // library op
  ops::Call call;    // its typed call
  std::vector<int> inputs, outputs;  // program tensors
  std::vector<ops::Shape> shapes;    // when set: the shapes the op sees its inputs as (same bytes, e.g. M x K)
  std::string kernel;                // the kernel's name in tasks and traces (empty: the op's CamelCase name)
  std::vector<std::string> sources;  // the imported graph nodes it runs ("OpType name", Node::sources)
};

struct Program {
  std::vector<ProgramTensor> tensors;
  std::vector<Step> steps;
  std::vector<int> inputs, outputs;  // in the graph's order
};

// The ONNX op types the lowering takes.
const std::vector<std::string>& supported_op_types();

// Throws InputError naming the node for a node it cannot lower (unsupported attributes, broadcasts, dtypes,
// unknown shapes).
Program lower(const Graph& g);

}  // namespace npusim::stack::graph
