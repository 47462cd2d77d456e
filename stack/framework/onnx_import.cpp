#include "stack/framework/onnx_import.hpp"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "common/util/atomic_file.hpp"
#include "common/util/error.hpp"
#include "common/util/file.hpp"
#include "stack/framework/onnx_model.hpp"
#include "stack/graph/onnx_ops/host_array.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::framework {

using graph::Attribute;
using graph::Dim;
using graph::Dims;
using graph::ElemType;
using graph::Graph;
using graph::Tensor;

ElemType elem_type(int onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return ElemType::kFloat32;
    case onnx::TensorProto::FLOAT16: return ElemType::kFloat16;
    case onnx::TensorProto::BFLOAT16: return ElemType::kBFloat16;
    case onnx::TensorProto::DOUBLE: return ElemType::kFloat64;
    case onnx::TensorProto::INT64: return ElemType::kInt64;
    case onnx::TensorProto::INT32: return ElemType::kInt32;
    case onnx::TensorProto::INT16: return ElemType::kInt16;
    case onnx::TensorProto::INT8: return ElemType::kInt8;
    case onnx::TensorProto::UINT8: return ElemType::kUint8;
    case onnx::TensorProto::UINT32: return ElemType::kUint32;
    case onnx::TensorProto::UINT64: return ElemType::kUint64;
    case onnx::TensorProto::BOOL: return ElemType::kBool;
    default: return ElemType::kUndefined;
  }
}

namespace {

// A TensorProto's element type and dims, checked, with the count of values its data holds (raw bytes / element
// size, or the length of the typed field it uses). ONNX's own shape inference trusts the dims of a constant and
// would read past short data, so every tensor of a model goes through this before inference does.
struct TensorLayout {
  ElemType type = ElemType::kUndefined;
  std::vector<std::int64_t> shape;
  std::size_t elements = 0, elem_bytes = 0;
};

std::size_t typed_values(const onnx::TensorProto& t, ElemType type) {
  switch (type) {
    case ElemType::kFloat32: return static_cast<std::size_t>(t.float_data_size());
    case ElemType::kFloat64: return static_cast<std::size_t>(t.double_data_size());
    case ElemType::kInt64: return static_cast<std::size_t>(t.int64_data_size());
    case ElemType::kUint32:
    case ElemType::kUint64: return static_cast<std::size_t>(t.uint64_data_size());
    default: return static_cast<std::size_t>(t.int32_data_size());
  }
}

TensorLayout checked_layout(const onnx::TensorProto& t, const std::string& what) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
    throw InputError(what + ": tensor '" + t.name() + "' keeps its data in an external file (not supported: save the model with the data inside)");
  TensorLayout l;
  l.type = elem_type(t.data_type());
  if (l.type == ElemType::kUndefined)
    throw InputError(what + ": tensor '" + t.name() + "' has an unsupported element type (" +
                     (onnx::TensorProto_DataType_IsValid(t.data_type())
                          ? onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t.data_type()))
                          : std::to_string(t.data_type())) +
                     ")");
  long double count = 1, nonzero = 1;  // in long double: 2^64 products neither wrap nor overflow
  for (auto d : t.dims()) {
    if (d < 0) throw InputError(what + ": tensor '" + t.name() + "' has the negative dim " + std::to_string(d));
    l.shape.push_back(d);
    count *= static_cast<long double>(d);
    if (d != 0) nonzero *= static_cast<long double>(d);
  }
  if (count > static_cast<long double>(std::uint64_t{1} << 53))
    throw InputError(what + ": tensor '" + t.name() + "' has more than 2^53 elements");
  // An empty tensor's other dims still enter shape arithmetic (Flatten's outer product): bounded the same way.
  if (nonzero > static_cast<long double>(std::uint64_t{1} << 53))
    throw InputError(what + ": tensor '" + t.name() + "' has dims whose product, its 0 dims aside, is past 2^53");
  l.elements = static_cast<std::size_t>(count);
  l.elem_bytes = graph::elem_bytes(l.type);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != l.elements * l.elem_bytes)
      throw InputError(what + ": tensor '" + t.name() + "' has " + std::to_string(t.raw_data().size()) +
                       " bytes of data for " + std::to_string(l.elements) + " elements");
  } else if (const std::size_t values = typed_values(t, l.type); values != l.elements) {
    throw InputError(what + ": tensor '" + t.name() + "' has " + std::to_string(values) + " values for " +
                     std::to_string(l.elements) + " elements");
  }
  return l;
}

// Typed fields of a TensorProto -> little-endian bytes of the element type.
Tensor tensor_of(const onnx::TensorProto& t, const std::string& what) {
  const TensorLayout l = checked_layout(t, what);
  Tensor out;
  out.type = l.type;
  out.shape = l.shape;
  const std::size_t n = l.elements, es = l.elem_bytes;
  if (t.has_raw_data()) {
    out.bytes.assign(t.raw_data().begin(), t.raw_data().end());
    return out;
  }
  auto put = [&](auto get) {
    out.bytes.resize(n * es);  // the count was checked against the data: the dims alone do not decide it
    for (std::size_t i = 0; i < n; ++i) get(i, out.bytes.data() + i * es);
  };
  switch (out.type) {
    case ElemType::kFloat32:
      put([&](std::size_t i, std::uint8_t* p) {
        const float v = t.float_data(static_cast<int>(i));
        std::memcpy(p, &v, 4);
      });
      break;
    case ElemType::kFloat64:
      put([&](std::size_t i, std::uint8_t* p) {
        const double v = t.double_data(static_cast<int>(i));
        std::memcpy(p, &v, 8);
      });
      break;
    case ElemType::kInt64:
      put([&](std::size_t i, std::uint8_t* p) {
        const std::int64_t v = t.int64_data(static_cast<int>(i));
        std::memcpy(p, &v, 8);
      });
      break;
    case ElemType::kUint32:
    case ElemType::kUint64:
      put([&](std::size_t i, std::uint8_t* p) {
        const std::uint64_t v = t.uint64_data(static_cast<int>(i));
        std::memcpy(p, &v, es);  // little-endian: the low bytes
      });
      break;
    default:  // int32_data holds int32, int16, int8, uint8, bool, fp16 and bf16 (the low bits of each entry)
      put([&](std::size_t i, std::uint8_t* p) {
        const std::int32_t v = t.int32_data(static_cast<int>(i));
        std::memcpy(p, &v, es);
      });
      break;
  }
  return out;
}

Attribute attribute_of(const onnx::AttributeProto& a, const std::string& node, const std::string& what) {
  Attribute out;
  switch (a.type()) {
    case onnx::AttributeProto::INT: out.kind = Attribute::Kind::kInt; out.i = a.i(); break;
    case onnx::AttributeProto::FLOAT: out.kind = Attribute::Kind::kFloat; out.f = a.f(); break;
    case onnx::AttributeProto::STRING: out.kind = Attribute::Kind::kString; out.s = a.s(); break;
    case onnx::AttributeProto::INTS:
      out.kind = Attribute::Kind::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      out.kind = Attribute::Kind::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::TENSOR:
      out.kind = Attribute::Kind::kTensor;
      out.t = tensor_of(a.t(), what);
      break;
    case onnx::AttributeProto::GRAPH: case onnx::AttributeProto::GRAPHS:
      throw InputError(what + ": node '" + node + "' has a subgraph (attribute '" + a.name() + "'): control flow is not supported");
    default:
      throw InputError(what + ": node '" + node + "': attribute '" + a.name() + "' has an unsupported kind");
  }
  return out;
}

// The type and shape a ValueInfoProto gives (an unknown rank stays unknown).
void type_of(const onnx::ValueInfoProto& vi, ElemType* type, std::optional<Dims>* shape) {
  if (!vi.type().has_tensor_type()) return;
  const auto& tt = vi.type().tensor_type();
  *type = elem_type(tt.elem_type());
  if (!tt.has_shape()) return;
  Dims d;
  for (const auto& dim : tt.shape().dim()) {
    if (dim.has_dim_value()) d.push_back(Dim::of(dim.dim_value()));
    else d.push_back(Dim::sym(dim.has_dim_param() ? dim.dim_param() : std::string()));
  }
  *shape = d;
}

// ONNX's shape inference fills value_info; a model it rejects is reported as such.
// Strict, as ONNX Runtime resolves a graph: a node whose input shapes or types do not fit its op (a MatMul of
// [4, 8] by [7, 3]) is an error naming the node, not an unknown shape further on. Ops ONNX does not know are skipped
// here and reported with every unsupported node later.
Graph build_graph(const onnx::GraphProto& gp, const std::string& what);

// Input and output counts against each node's schema at the model's opsets. ONNX 1.12's strict inference lets a
// node with too few inputs through (the lowering caught it later) and 1.17's reports it in its own words; checked
// here first, every release gives the same error.
void check_arity(const onnx::ModelProto& model, const std::string& what) {
  std::map<std::string, int> versions;
  for (const auto& op : model.opset_import()) versions[op.domain() == "ai.onnx" ? "" : op.domain()] = static_cast<int>(op.version());
  auto range = [](int lo, int hi) {
    if (lo == hi) return std::to_string(lo);
    if (hi == std::numeric_limits<int>::max()) return "at least " + std::to_string(lo);
    return std::to_string(lo) + " to " + std::to_string(hi);
  };
  for (int i = 0; i < model.graph().node_size(); ++i) {
    const onnx::NodeProto& n = model.graph().node(i);
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    const auto v = versions.find(domain);
    if (v == versions.end()) continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), v->second, domain);
    if (!schema) continue;  // an op ONNX does not know: reported with the unsupported ones
    const std::string node = what + ": node '" + (n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name()) + "' (" + n.op_type() + "): ";
    const std::string op = n.op_type() + "-" + std::to_string(schema->SinceVersion());
    if (n.input_size() < schema->min_input() || n.input_size() > schema->max_input())
      throw InputError(std::string(node)
                           .append(std::to_string(n.input_size()))
                           .append(" input(s), but ")
                           .append(op)
                           .append(" takes ")
                           .append(range(schema->min_input(), schema->max_input())));
    if (n.output_size() < schema->min_output() || n.output_size() > schema->max_output())
      throw InputError(std::string(node)
                           .append(std::to_string(n.output_size()))
                           .append(" output(s), but ")
                           .append(op)
                           .append(" gives ")
                           .append(range(schema->min_output(), schema->max_output())));
  }
}

// Every tensor of the graph and its subgraphs (initializers, node attributes) against its dims, before ONNX's
// inference reads any of them. Sparse tensors are refused here: nothing further on reads them.
void check_tensor_data(const onnx::GraphProto& g, const std::string& what);

void check_node_tensors(const onnx::NodeProto& n, const std::string& what) {
  for (const auto& a : n.attribute()) {
    if (a.has_t()) checked_layout(a.t(), what);
    for (const auto& t : a.tensors()) checked_layout(t, what);
    if (a.has_g()) check_tensor_data(a.g(), what);
    for (const auto& sub : a.graphs()) check_tensor_data(sub, what);
    if (a.has_sparse_tensor() || a.sparse_tensors_size() > 0)
      throw InputError(what + ": node '" + n.name() + "': attribute '" + a.name() +
                       "' holds a sparse tensor: sparse tensors are not supported");
  }
}

void check_tensor_data(const onnx::GraphProto& g, const std::string& what) {
  for (const auto& t : g.initializer()) checked_layout(t, what);
  if (g.sparse_initializer_size() > 0)
    throw InputError(what + ": sparse initializer '" + g.sparse_initializer(0).values().name() +
                     "': sparse tensors are not supported");
  for (const auto& n : g.node()) check_node_tensors(n, what);
}

// The graph's tensors and those of the model's local functions (ONNX's inference runs their bodies too).
void check_tensor_data(const onnx::ModelProto& m, const std::string& what) {
  check_tensor_data(m.graph(), what);
  for (const auto& f : m.functions())
    for (const auto& n : f.node()) check_node_tensors(n, what);
}

void infer(onnx::ModelProto& model, const std::string& what) {
  check_arity(model, what);
  try {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), onnx::ShapeInferenceOptions{true, 1, false});
  } catch (const std::exception& e) {
    const std::string strict = e.what();
    // A broken structure (an input nothing produces, a cycle) fails inference too: the IR's verifier names it
    // more clearly, so it speaks first.
    onnx::ModelProto loose = model;
    try {
      onnx::shape_inference::InferShapes(loose);
    } catch (const std::exception& e2) {
      throw InputError(what + ": ONNX shape inference failed: " + e2.what());
    }
    build_graph(loose.graph(), what);
    throw InputError(what + ": ONNX shape inference failed: " + strict);
  }
}

int onnx_type(ElemType t) {
  switch (t) {
    case ElemType::kFloat32: return onnx::TensorProto::FLOAT;
    case ElemType::kFloat16: return onnx::TensorProto::FLOAT16;
    case ElemType::kBFloat16: return onnx::TensorProto::BFLOAT16;
    case ElemType::kFloat64: return onnx::TensorProto::DOUBLE;
    case ElemType::kInt64: return onnx::TensorProto::INT64;
    case ElemType::kInt32: return onnx::TensorProto::INT32;
    case ElemType::kInt16: return onnx::TensorProto::INT16;
    case ElemType::kInt8: return onnx::TensorProto::INT8;
    case ElemType::kUint8: return onnx::TensorProto::UINT8;
    case ElemType::kUint32: return onnx::TensorProto::UINT32;
    case ElemType::kUint64: return onnx::TensorProto::UINT64;
    case ElemType::kBool: return onnx::TensorProto::BOOL;
    case ElemType::kUndefined: break;
  }
  return onnx::TensorProto::UNDEFINED;
}

void set_tensor(onnx::TensorProto* p, const std::string& name, const Tensor& t) {
  p->set_name(name);
  p->set_data_type(onnx_type(t.type));
  for (auto d : t.shape) p->add_dims(d);
  p->set_raw_data(std::string(t.bytes.begin(), t.bytes.end()));
}

// The graph IR of a GraphProto whose value_info shape inference has filled.
Graph build_graph(const onnx::GraphProto& gp, const std::string& what) {
  Graph g;
  g.name = gp.name();
  try {
    std::vector<std::string> init_names;
    for (const auto& t : gp.initializer()) {
      g.add_constant(t.name(), tensor_of(t, what));
      init_names.push_back(t.name());
    }
    auto declare = [&](const onnx::ValueInfoProto& vi) {
      ElemType type = ElemType::kUndefined;
      std::optional<Dims> shape;
      type_of(vi, &type, &shape);
      const graph::ValueId existing = g.find_value(vi.name());
      if (existing != graph::kNoValue) {  // an initializer also listed as an input or with value_info
        return existing;
      }
      return g.add_value(vi.name(), type, shape);
    };
    for (const auto& vi : gp.input()) {
      const bool is_init = std::find(init_names.begin(), init_names.end(), vi.name()) != init_names.end();
      const graph::ValueId id = declare(vi);
      if (!is_init) g.inputs.push_back(id);
    }
    for (const auto& vi : gp.value_info()) declare(vi);
    for (const auto& vi : gp.output()) declare(vi);
    for (int i = 0; i < gp.node_size(); ++i) {
      const onnx::NodeProto& np = gp.node(i);
      graph::Node n;
      n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
      n.op_type = np.op_type();
      n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
      for (const auto& a : np.attribute()) n.attrs[a.name()] = attribute_of(a, n.name, what);
      for (const auto& in : np.input()) {
        if (in.empty()) {
          n.inputs.push_back(graph::kNoValue);
          continue;
        }
        graph::ValueId id = g.find_value(in);
        if (id == graph::kNoValue) id = g.add_value(in, ElemType::kUndefined);
        n.inputs.push_back(id);
      }
      for (const auto& o : np.output()) {
        // An empty name is an optional output left out: a value of its own, never another node's.
        graph::ValueId id = o.empty() ? graph::kNoValue : g.find_value(o);
        if (id == graph::kNoValue) id = g.add_value(o, ElemType::kUndefined);
        n.outputs.push_back(id);
      }
      g.add_node(std::move(n));
    }
    for (const auto& vi : gp.output()) g.outputs.push_back(g.find_value(vi.name()));
    g.verify();
  } catch (const graph::GraphError& e) {
    throw InputError(what + ": " + e.what());
  }
  return g;
}

// Writes a folding round back into the model: the nodes the IR dropped leave (IR node ids are the model's node
// indices, nothing was compacted), the constants live nodes or graph outputs read become initializers, and the
// inferred value_info is cleared for the next inference.
void fold_into(onnx::ModelProto& model, const Graph& g) {
  onnx::GraphProto* gp = model.mutable_graph();
  std::set<std::string> inits;
  for (const auto& t : gp->initializer()) inits.insert(t.name());
  auto keep_constant = [&](graph::ValueId v) {
    if (v == graph::kNoValue) return;
    const graph::Value& val = g.value(v);
    if (!val.constant || inits.count(val.name)) return;
    set_tensor(gp->add_initializer(), val.name, *val.constant);
    inits.insert(val.name);
  };
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < gp->node_size(); ++i) {
    const graph::Node& n = g.node(static_cast<graph::NodeId>(i));
    if (!n.alive) continue;
    for (graph::ValueId v : n.inputs) keep_constant(v);
    onnx::NodeProto* k = kept.Add();
    *k = gp->node(i);
    if (k->name().empty()) k->set_name(n.name);  // its index shifts in the next round: keep the name it was given
  }
  for (graph::ValueId v : g.outputs) keep_constant(v);
  gp->mutable_node()->Swap(&kept);
  gp->clear_value_info();
}

// The inputs of `out.graph` whose values decide shapes and that `values` has become initializers of `model` (and
// leave its inputs); false when there are none.
bool bind_inputs(onnx::ModelProto& model, ImportedModel& out, const std::map<std::string, Tensor>& values,
                 const std::string& what) {
  bool bound = false;
  for (const graph::ValueId id : graph::onnx_ops::shape_deciding_inputs(out.graph)) {
    const graph::Value& v = out.graph.value(id);
    const auto it = values.find(v.name);
    if (it == values.end()) continue;
    Tensor t = it->second;
    std::string where = what + ": input '";
    where.append(v.name).append("'");
    const auto integer = [](ElemType e) { return graph::storage_dtype(e) == hw::isa::DType::kInt32; };
    if (t.type != v.type && integer(t.type) && integer(v.type)) {  // int32 data for an int64 input: converted
      const std::vector<std::int64_t> ints = t.as_ints();
      const std::size_t es = graph::elem_bytes(v.type);
      t.bytes.assign(ints.size() * es, 0);
      for (std::size_t i = 0; i < ints.size(); ++i) std::memcpy(&t.bytes[i * es], &ints[i], es);  // little-endian
      t.type = v.type;
    }
    if (t.type != v.type)
      throw InputError(where + " is " + std::string(elem_name(v.type)) + ", its value " +
                       std::string(elem_name(t.type)));
    if (v.shape) {
      bool same = v.shape->size() == t.shape.size();
      for (std::size_t d = 0; same && d < t.shape.size(); ++d)
        same = !(*v.shape)[d].known() || (*v.shape)[d].value == t.shape[d];
      if (!same) {
        graph::Dims given;
        for (const std::int64_t d : t.shape) given.push_back(graph::Dim::of(d));
        throw InputError(where + " has the shape " + graph::dims_string(*v.shape) + ", its value " +
                         graph::dims_string(given));
      }
    }
    auto* inputs = model.mutable_graph()->mutable_input();
    for (int i = 0; i < inputs->size(); ++i)
      if (inputs->Get(i).name() == v.name) {
        inputs->DeleteSubrange(i, 1);
        break;
      }
    set_tensor(model.mutable_graph()->add_initializer(), v.name, t);
    out.bound.push_back(v.name);
    bound = true;
  }
  return bound;
}

// IR versions 3 (the first with opset imports) to 14 (what ONNX 1.23, pinned in requirements.txt, writes by
// default): 0 means the field was never set (not a model, or a truncated one), and a version past 14 may hold
// constructs this importer does not know (issue 23).
constexpr std::int64_t kMinIrVersion = 3, kMaxIrVersion = 14;

void check_ir_version(const onnx::ModelProto& model, const std::string& what) {
  const std::int64_t v = model.ir_version();
  if (v == 0) throw InputError(what + ": ir_version is not set: not an ONNX model, or a truncated one");
  if (v < kMinIrVersion || v > kMaxIrVersion) {
    throw InputError(what + ": ir_version " + std::to_string(v) + " is outside the versions npusim reads (" +
                     std::to_string(kMinIrVersion) + " to " + std::to_string(kMaxIrVersion) + ")");
  }
}

// Parsed model -> IR: external data in, newer opsets in opset-17 forms, symbolic dims bound, then inference and
// folding in turns.
ImportedModel import_model(onnx::ModelProto& model, const std::string& what, const std::string& model_dir,
                           const ImportOptions& opts) {
  const std::map<std::string, std::int64_t>& dims = opts.dims;
  ImportedModel out;
  check_ir_version(model, what);
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") out.opset = op.version();
  load_external_data(model, model_dir, what);
  check_tensor_data(model, what);
  out.adapted = adapt_to_engine_opset(model, what);
  out.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  // Bound symbolic dims become sizes on the inputs, so inference can propagate them.
  std::map<std::string, bool> used;
  for (auto& in : *model.mutable_graph()->mutable_input()) {
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    for (auto& d : *in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
      if (!d.has_dim_param()) continue;
      const auto it = dims.find(d.dim_param());
      if (it == dims.end()) continue;
      used[it->first] = true;
      d.set_dim_value(it->second);
    }
  }
  for (const auto& [name, size] : dims)
    if (!used.count(name)) {
      std::string msg = what + ": --dim ";
      msg.append(name)
          .append("=")
          .append(std::to_string(size))
          .append(": no input has a dim named '")
          .append(name)
          .append("'");
      throw InputError(msg);
    }
  {
    std::set<std::string> inits;
    for (const auto& t : model.graph().initializer()) inits.insert(t.name());
    for (const auto& in : model.graph().input())
      if (!inits.count(in.name())) out.declared_inputs.push_back(in.name());
  }
  // Constant folding needs shapes and shape inference needs folded shapes (an Expand to a computed shape): the two
  // alternate until nothing more folds. Folded nodes leave the model; their outputs come back as initializers. Then
  // the inputs whose values decide shapes, when the caller has their values, become initializers, and it all
  // starts again.
  for (;;) {
    for (int round = 0;; ++round) {
      infer(model, what);
      Graph g = build_graph(model.graph(), what);
      const int folded = graph::passes::fold_constants(g);
      const int dead = graph::passes::remove_dead_nodes(g);
      out.folded += folded;
      if ((folded == 0 && dead == 0) || round == 16) {
        g.compact();
        g.opset = out.opset;
        out.graph = std::move(g);
        break;
      }
      fold_into(model, g);
    }
    if (!bind_inputs(model, out, opts.values, what)) break;
  }
  return out;
}

onnx::ModelProto parse_model(const std::string& bytes, const std::string& what) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes) || !model.has_graph())
    throw InputError(what + ": not an ONNX model (the protobuf does not parse as a ModelProto with a graph)");
  return model;
}

}  // namespace

ImportedModel import_onnx(const std::string& path, const ImportOptions& opts) {
  onnx::ModelProto model = parse_model(read_file(path, "cannot read the model file"), path);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return import_model(model, path, dir.empty() ? "." : dir, opts);
}

ImportedModel import_onnx_bytes(const std::string& bytes, const std::string& what, const ImportOptions& opts) {
  onnx::ModelProto model = parse_model(bytes, what);
  return import_model(model, what, "", opts);
}

std::vector<std::string> onnx_input_names(const std::string& path) {
  const onnx::ModelProto model = parse_model(read_file(path, "cannot read the model file"), path);
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto& in : model.graph().input())
    if (!inits.count(in.name())) names.push_back(in.name());
  return names;
}

std::pair<std::string, graph::Tensor> read_tensor_pb(const std::string& path) {
  return parse_tensor_pb(read_file(path), path);
}

std::pair<std::string, graph::Tensor> parse_tensor_pb(const std::string& bytes, const std::string& path) {
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) throw InputError(path + ": not an ONNX TensorProto");
  // uint16 is bfloat16's bits, as in .npy files (ONNX 1.12's test data stores bfloat16 tensors so).
  if (t.data_type() == onnx::TensorProto::UINT16) t.set_data_type(onnx::TensorProto::BFLOAT16);
  return {t.name(), tensor_of(t, path)};
}

void write_tensor_pb(const std::string& path, const std::string& name, const graph::Tensor& t) {
  onnx::TensorProto p;
  p.set_name(name);
  const int type = onnx_type(t.type);
  if (type == onnx::TensorProto::UNDEFINED)
    throw InputError(path + ": " + std::string(elem_name(t.type)) + " tensors are not written");
  p.set_data_type(type);
  for (auto d : t.shape) p.add_dims(d);
  p.set_raw_data(std::string(t.bytes.begin(), t.bytes.end()));
  std::string bytes;
  if (!p.SerializeToString(&bytes)) throw InputError(path + ": cannot serialise the tensor");
  write_file_atomically(path, bytes);
}

std::vector<std::string> unsupported_nodes(const graph::Graph& g, const std::vector<std::string>& supported) {
  std::vector<std::string> out;
  for (graph::NodeId id : g.topo_order()) {
    const graph::Node& n = g.node(id);
    const std::string key = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    const bool known = std::find(supported.begin(), supported.end(), key) != supported.end();
    if (known) continue;
    std::string item = n.name + " (" + (n.domain.empty() ? "" : n.domain + ".") + n.op_type + ")";
    // An op that only folds on the host (ConstantOfShape, Range...) stays when its output is too large to fold:
    // say so rather than leave it looking like an op npusim lacks.
    for (graph::ValueId v : n.outputs) {
      const auto& shape = g.value(v).shape;
      if (!shape) continue;
      long double count = 1;
      for (const graph::Dim& d : *shape) count *= d.known() ? static_cast<long double>(d.value) : 0;
      if (count > static_cast<long double>(graph::onnx_ops::kMaxFoldElements)) {
        item += " [its output '" + g.value(v).name + "' " + graph::dims_string(*shape) + " has more than the " +
                std::to_string(graph::onnx_ops::kMaxFoldElements) + " elements host folding takes]";
        break;
      }
    }
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace npusim::stack::framework
