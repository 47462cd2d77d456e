// Rewrites of an onnx::ModelProto that import does before ONNX's shape inference (internal to the framework layer;
// onnx_import.hpp is the public face).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "stack/graph/graph.hpp"

namespace npusim::stack::framework {

// ONNX's TensorProto element type -> the IR's (kUndefined for one npusim does not take).
graph::ElemType elem_type(int onnx_type);

// The opset the graph engine reads: its passes and lowering match opset-17 forms (axes as attributes, Split sizes
// as an input), and Debian 12's ONNX 1.12 infers shapes up to it.
inline constexpr std::int64_t kEngineOpset = 17;
// The newest default-domain opset import accepts; models from 18 on are rewritten into opset-17 forms.
inline constexpr std::int64_t kNewestOpset = 21;

// Brings tensors stored in external files (torch.onnx.export's default writes MODEL.onnx.data beside the model)
// into the model. `model_dir` is the model file's directory (empty: the bytes came from no file, and external data
// is refused). A location must be a relative path that stays inside `model_dir`; offset and length must lie within
// the file and match the tensor's size. Throws InputError naming `what`, the tensor and the location.
void load_external_data(onnx::ModelProto& model, const std::string& model_dir, const std::string& what);

// Rewrites a model whose default-domain opset is 18..kNewestOpset into opset-17 forms, node by node, and sets its
// import to 17 (docs/graph.md, "Opsets"): reductions' axes input -> attribute (noop_with_empty_axes -> Identity),
// Split's num_outputs -> the even split of opset 13, Cast's saturate (float8 only) dropped, Gelu (new in 20) ->
// npusim.Gelu, whose schema is registered with ONNX for shape inference. Ops whose changes are type lists only keep
// their form. Returns the number of nodes rewritten; throws InputError for an opset past kNewestOpset or a form
// that has no opset-17 equivalent (a reduction whose axes are not constant).
int adapt_to_engine_opset(onnx::ModelProto& model, const std::string& what);

}  // namespace npusim::stack::framework
