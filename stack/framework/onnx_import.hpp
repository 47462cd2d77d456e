// ONNX import (issue 7): an ONNX model file -> the graph IR, with Debian's libonnx and protobuf. External data is
// read from beside the model; opsets 18..21 are rewritten into opset-17 forms (onnx_model.hpp); ONNX's own shape
// inference runs, so values carry the types and shapes it can infer (symbolic dims keep their names); initializers
// become constants; node attributes keep their kinds. Control-flow nodes with subgraphs are refused with errors
// naming the model and the node.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "stack/graph/graph.hpp"

namespace npusim::stack::framework {

struct ImportedModel {
  graph::Graph graph;
  std::int64_t opset = 0;  // the default domain's opset version
  std::string producer;    // producer_name [+ version]
  int folded = 0;          // nodes constant folding evaluated on the host
  int adapted = 0;         // nodes of an opset-18+ model rewritten into their opset-17 forms (onnx_model.hpp)
  std::vector<std::string> declared_inputs;  // the model's inputs (initializers left out) in order, bound ones too
  std::vector<std::string> bound;            // the inputs bound to their values (ImportOptions::values)
};

struct ImportOptions {
  std::map<std::string, std::int64_t> dims;  // symbolic input dims (dim_param names) bound to sizes
  // Values of inputs, as the caller has them: the ones whose values decide shapes or structure (a Slice's starts, a
  // Split's sizes, a Range's bounds, a Trilu's k: graph::onnx_ops::shape_deciding_inputs) become constants of the
  // model, so folding and the lowering see them; the others stay inputs. Each is checked against the input's type
  // and shape.
  std::map<std::string, graph::Tensor> values;
};

// Throws InputError: the file cannot be read or parsed, its external data is missing or leaves its directory, its
// opset is newer than 21, or its graph does not verify.
ImportedModel import_onnx(const std::string& path, const ImportOptions& opts = {});
// The same from the bytes of a ModelProto; `what` names it in errors. External data is refused (no directory).
ImportedModel import_onnx_bytes(const std::string& bytes, const std::string& what, const ImportOptions& opts = {});

// The names of a model file's inputs (initializers left out), in the graph's order, without importing it; throws
// InputError as import_onnx does for a file that is not a model.
std::vector<std::string> onnx_input_names(const std::string& path);

// An ONNX TensorProto file (.pb, as the ONNX test data keeps inputs and outputs) -> its name and data (a uint16
// tensor as bfloat16 bits, as in .npy files); throws InputError naming the file.
std::pair<std::string, graph::Tensor> read_tensor_pb(const std::string& path);
// The same from the file's bytes; `name` names it in errors.
std::pair<std::string, graph::Tensor> parse_tensor_pb(const std::string& bytes, const std::string& name);
// Writes `t` as a TensorProto named `name` (raw data).
void write_tensor_pb(const std::string& path, const std::string& name, const graph::Tensor& t);

// Nodes whose op type ("Op" in the default domain, "domain.Op" elsewhere) is not in `supported`, as "name (OpType)" in graph order; a caller
// reports them all in one error.
std::vector<std::string> unsupported_nodes(const graph::Graph& g, const std::vector<std::string>& supported);

}  // namespace npusim::stack::framework
