// The graph engine's IR (issue 7): nodes with an op type, domain, attributes and ordered inputs and outputs; values
// with an element type, a shape whose dims may be symbols bound at run time, and optional constant data; the
// producer and consumer maps, kept up to date as passes rewrite the graph; a verifier and a topological order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hw/isa/dtype.hpp"

namespace npusim::stack::graph {

// A malformed graph: the message names the node or value.
class GraphError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ElemType : std::uint8_t {
  kUndefined,
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUint8,
  kUint32,
  kUint64,
  kBool
};
std::string_view elem_name(ElemType t);
std::size_t elem_bytes(ElemType t);  // 0 for kUndefined
// The device element type of a float ElemType (float32, float16, bfloat16); none for the others.
std::optional<hw::isa::DType> device_dtype(ElemType t);
ElemType elem_type_of(hw::isa::DType t);
// The device element type a value of type t is stored in: the float types as they are, bool as int8 (0 or 1, one
// byte as CANN's bool), int64 / int32 / int16 / int8 / uint8 / uint32 / uint64 as int32 (indices, ids and masks; an
// int64 value outside int32 is refused where it crosses to the device), float64 as float32 (rounded to nearest where it
// crosses: the AI core has no float64 arithmetic); none for undefined.
std::optional<hw::isa::DType> storage_dtype(ElemType t);
// Host data of type `type` as the bytes of storage_dtype(type) (int64 narrowed to int32), and back; InputError
// naming `what` and the element for a value that does not fit.
std::vector<std::uint8_t> to_storage(ElemType type, const std::vector<std::uint8_t>& bytes, const std::string& what);
std::vector<std::uint8_t> from_storage(ElemType type, const std::vector<std::uint8_t>& bytes);

// A dimension: a fixed size, or a symbol ("batch", "seq") bound when the graph runs.
struct Dim {
  std::int64_t value = -1;
  std::string symbol;
  static Dim of(std::int64_t v) { return Dim{v, {}}; }
  static Dim sym(std::string s) { return Dim{-1, std::move(s)}; }
  bool known() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
  std::string str() const { return known() ? std::to_string(value) : (symbol.empty() ? std::string("?") : symbol); }
};
using Dims = std::vector<Dim>;
std::string dims_string(const Dims& d);

// Constant data: little-endian elements of `type`, row-major.
struct Tensor {
  ElemType type = ElemType::kUndefined;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
  std::int64_t elements() const;
  // The elements as doubles / integers (any numeric type); throws GraphError for kUndefined.
  std::vector<double> as_doubles() const;
  std::vector<std::int64_t> as_ints() const;
};

struct Attribute {
  enum class Kind : std::uint8_t { kInt, kFloat, kString, kInts, kFloats, kTensor };
  Kind kind = Kind::kInt;
  std::int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
  std::vector<float> floats;
  Tensor t;
  static Attribute of_int(std::int64_t v) {
    Attribute a;
    a.i = v;
    return a;
  }
  static Attribute of_float(float v) {
    Attribute a;
    a.kind = Kind::kFloat;
    a.f = v;
    return a;
  }
  static Attribute of_string(std::string v) {
    Attribute a;
    a.kind = Kind::kString;
    a.s = std::move(v);
    return a;
  }
  static Attribute of_ints(std::vector<std::int64_t> v) {
    Attribute a;
    a.kind = Kind::kInts;
    a.ints = std::move(v);
    return a;
  }
};

using ValueId = std::int32_t;
constexpr ValueId kNoValue = -1;  // an omitted optional input
using NodeId = std::int32_t;

struct Value {
  std::string name;
  ElemType type = ElemType::kUndefined;
  std::optional<Dims> shape;        // unknown rank when empty
  std::optional<Tensor> constant;   // initializers and folded constants
  NodeId producer = -1;             // -1: a graph input or a constant
  std::vector<NodeId> consumers;    // one entry per use (a node using it twice appears twice)
};

struct Node {
  std::string name, op_type, domain;  // domain "" is the default ONNX domain
  std::map<std::string, Attribute> attrs;
  std::vector<ValueId> inputs, outputs;
  bool alive = true;
  // The imported nodes a node made by a pass stands for ("OpType name" each, in the order the pass removed them);
  // empty for a node as imported. Graph::add_node fills it from the nodes removed since the last add.
  std::vector<std::string> origin;
  // origin, or the node itself ("OpType name") when it has none.
  std::vector<std::string> sources() const;
  const Attribute* attr(const std::string& key) const;
  std::int64_t attr_int(const std::string& key, std::int64_t def) const;
  float attr_float(const std::string& key, float def) const;
};

class Graph {
 public:
  std::string name;
  std::int64_t opset = 0;  // the default domain's opset version (0: unknown)

  // Values and nodes; ids stay valid while the graph lives (removed nodes are marked dead, see compact()).
  ValueId add_value(std::string name, ElemType type, std::optional<Dims> shape = std::nullopt);
  ValueId add_constant(std::string name, Tensor t);
  // Adds a node and links it as the producer of its outputs and a consumer of its inputs. A node without an origin
  // takes the sources of the nodes removed since the last add_node (a fusion pass removes what it fuses, then adds
  // the fused node).
  NodeId add_node(Node n);
  // Unlinks a node from its values and marks it dead; its outputs lose their producer.
  void remove_node(NodeId id);
  // Forgets the nodes removed since the last add_node: for removals that fuse nothing (folding, dead code).
  void forget_removed() { removed_.clear(); }
  // Every use of `from` (node inputs and graph outputs) becomes a use of `to`.
  void replace_uses(ValueId from, ValueId to);
  // Drops dead nodes (ids of live nodes are renumbered; values keep theirs).
  void compact();

  Value& value(ValueId id);
  const Value& value(ValueId id) const;
  Node& node(NodeId id);
  const Node& node(NodeId id) const;
  std::size_t value_count() const { return values_.size(); }
  std::size_t node_count() const { return nodes_.size(); }
  std::size_t live_nodes() const;
  ValueId find_value(const std::string& name) const;  // kNoValue when absent

  std::vector<ValueId> inputs, outputs;

  // The graph inputs `v` is computed from (itself when it is one), in the order of `inputs`; with `through`, only
  // along producers for which it holds (a Shape node reads its input's shape, not its values).
  std::vector<ValueId> inputs_reaching(ValueId v, const std::function<bool(const Node&)>& through = {}) const;
  // Live nodes in an order where every producer comes before its consumers; throws GraphError on a cycle.
  std::vector<NodeId> topo_order() const;
  // Checks the structure: inputs that exist and are produced (by a node, a graph input or a constant), values with
  // one producer, graph outputs that are produced, unique value names, producer/consumer maps consistent, no cycle.
  void verify() const;

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<std::string> removed_;  // sources of the nodes removed since the last add_node
  std::map<std::string, ValueId> by_name_;
};

}  // namespace npusim::stack::graph
