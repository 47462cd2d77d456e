#include "stack/graph/graph.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>

#include "common/util/error.hpp"
#include "hw/isa/dtype.hpp"

namespace npusim::stack::graph {

std::string_view elem_name(ElemType t) {
  switch (t) {
    case ElemType::kUndefined: return "undefined";
    case ElemType::kFloat32: return "float32";
    case ElemType::kFloat16: return "float16";
    case ElemType::kBFloat16: return "bfloat16";
    case ElemType::kFloat64: return "float64";
    case ElemType::kInt64: return "int64";
    case ElemType::kInt32: return "int32";
    case ElemType::kInt16: return "int16";
    case ElemType::kInt8: return "int8";
    case ElemType::kUint8: return "uint8";
    case ElemType::kUint32: return "uint32";
    case ElemType::kUint64: return "uint64";
    case ElemType::kBool: return "bool";
  }
  return "?";
}

std::size_t elem_bytes(ElemType t) {
  switch (t) {
    case ElemType::kFloat64:
    case ElemType::kInt64:
    case ElemType::kUint64: return 8;
    case ElemType::kFloat32:
    case ElemType::kInt32:
    case ElemType::kUint32: return 4;
    case ElemType::kFloat16: case ElemType::kBFloat16: case ElemType::kInt16: return 2;
    case ElemType::kInt8: case ElemType::kUint8: case ElemType::kBool: return 1;
    case ElemType::kUndefined: return 0;
  }
  return 0;
}

std::optional<hw::isa::DType> device_dtype(ElemType t) {
  switch (t) {
    case ElemType::kFloat32: return hw::isa::DType::kFp32;
    case ElemType::kFloat16: return hw::isa::DType::kFp16;
    case ElemType::kBFloat16: return hw::isa::DType::kBf16;
    default: return std::nullopt;
  }
}

ElemType elem_type_of(hw::isa::DType t) {
  switch (t) {
    case hw::isa::DType::kFp32: return ElemType::kFloat32;
    case hw::isa::DType::kFp16: return ElemType::kFloat16;
    case hw::isa::DType::kBf16: return ElemType::kBFloat16;
    case hw::isa::DType::kInt32: return ElemType::kInt32;
    case hw::isa::DType::kInt8: return ElemType::kInt8;
  }
  return ElemType::kUndefined;
}

std::optional<hw::isa::DType> storage_dtype(ElemType t) {
  if (const auto d = device_dtype(t)) return d;
  switch (t) {
    case ElemType::kFloat64: return hw::isa::DType::kFp32;
    case ElemType::kBool: return hw::isa::DType::kInt8;
    case ElemType::kInt64:
    case ElemType::kInt32:
    case ElemType::kInt16:
    case ElemType::kInt8:
    case ElemType::kUint8:
    case ElemType::kUint32:
    case ElemType::kUint64: return hw::isa::DType::kInt32;
    default: return std::nullopt;
  }
}

std::vector<std::uint8_t> to_storage(ElemType type, const std::vector<std::uint8_t>& bytes, const std::string& what) {
  const auto d = storage_dtype(type);
  if (!d) throw InputError(what + ": element type " + std::string(elem_name(type)) + " has no device form");
  if (elem_type_of(*d) == type) return bytes;
  if (type == ElemType::kBool) {  // any non-zero byte is true
    std::vector<std::uint8_t> out(bytes.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) out[i] = bytes[i] != 0;
    return out;
  }
  if (type == ElemType::kFloat64) {  // rounded to the nearest float32
    std::vector<std::uint8_t> out(bytes.size() / 2);
    for (std::size_t i = 0; i < out.size() / 4; ++i) {
      double v = 0;
      std::memcpy(&v, &bytes[i * 8], 8);
      const auto f = static_cast<float>(v);
      std::memcpy(&out[i * 4], &f, 4);
    }
    return out;
  }
  Tensor t;
  t.type = type;
  t.shape = {static_cast<std::int64_t>(bytes.size() / elem_bytes(type))};
  t.bytes = bytes;
  const std::vector<std::int64_t> v = t.as_ints();
  std::vector<std::uint8_t> out(v.size() * 4);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < INT32_MIN || v[i] > INT32_MAX)
      throw InputError(what + ": element " + std::to_string(i) + " is " + std::to_string(v[i]) +
                       ", outside int32 (the device holds " + std::string(elem_name(type)) + " values as int32)");
    const auto x = static_cast<std::int32_t>(v[i]);
    std::memcpy(&out[i * 4], &x, 4);
  }
  return out;
}

std::vector<std::uint8_t> from_storage(ElemType type, const std::vector<std::uint8_t>& bytes) {
  const auto d = storage_dtype(type);
  if (!d || elem_type_of(*d) == type || type == ElemType::kBool) return bytes;
  const std::size_t n = bytes.size() / 4, es = elem_bytes(type);
  std::vector<std::uint8_t> out(n * es);
  if (type == ElemType::kFloat64) {
    for (std::size_t i = 0; i < n; ++i) {
      float f = 0;
      std::memcpy(&f, &bytes[i * 4], 4);
      const double v = f;
      std::memcpy(&out[i * 8], &v, 8);
    }
    return out;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t x = 0;
    std::memcpy(&x, &bytes[i * 4], 4);
    const std::int64_t v = x;
    std::memcpy(&out[i * es], &v, es);  // little-endian: the low bytes of the value
  }
  return out;
}

std::string dims_string(const Dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + d[i].str();
  return s + "]";
}

std::int64_t Tensor::elements() const {
  // A 0 dim makes an empty tensor whatever the others say; a product past int64 saturates (callers refuse more
  // than 2^53 elements) instead of overflowing.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t n = 1;
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<std::int64_t>::max();
  return n;
}

std::vector<double> Tensor::as_doubles() const {
  const std::size_t es = elem_bytes(type);
  if (es == 0) throw GraphError("constant of undefined element type");
  const std::size_t n = bytes.size() / es;
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = bytes.data() + i * es;
    switch (type) {
      case ElemType::kFloat32: case ElemType::kFloat16: case ElemType::kBFloat16:
        out[i] = hw::isa::load_float(p, *device_dtype(type));
        break;
      case ElemType::kFloat64: { double v; std::memcpy(&v, p, 8); out[i] = v; break; }
      case ElemType::kInt64: { std::int64_t v; std::memcpy(&v, p, 8); out[i] = static_cast<double>(v); break; }
      case ElemType::kInt32: { std::int32_t v; std::memcpy(&v, p, 4); out[i] = v; break; }
      case ElemType::kInt16: { std::int16_t v; std::memcpy(&v, p, 2); out[i] = v; break; }
      case ElemType::kInt8: out[i] = static_cast<std::int8_t>(*p); break;
      case ElemType::kUint8: case ElemType::kBool: out[i] = *p; break;
      case ElemType::kUint32: {
        std::uint32_t v;
        std::memcpy(&v, p, 4);
        out[i] = v;
        break;
      }
      case ElemType::kUint64: {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        out[i] = static_cast<double>(v);
        break;
      }
      case ElemType::kUndefined: break;
    }
  }
  return out;
}

std::vector<std::int64_t> Tensor::as_ints() const {
  const std::vector<double> d = as_doubles();
  std::vector<std::int64_t> out(d.size());
  if (type == ElemType::kInt64 || type == ElemType::kUint64) {  // exact, beyond 2^53 too (uint64 up to 2^63)
    for (std::size_t i = 0; i < out.size(); ++i) std::memcpy(&out[i], bytes.data() + i * 8, 8);
    return out;
  }
  for (std::size_t i = 0; i < d.size(); ++i) out[i] = static_cast<std::int64_t>(d[i]);
  return out;
}

const Attribute* Node::attr(const std::string& key) const {
  const auto it = attrs.find(key);
  return it == attrs.end() ? nullptr : &it->second;
}
std::int64_t Node::attr_int(const std::string& key, std::int64_t def) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::kInt ? a->i : def;
}
float Node::attr_float(const std::string& key, float def) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::kFloat ? a->f : def;
}

ValueId Graph::add_value(std::string name, ElemType type, std::optional<Dims> shape) {
  if (name.empty()) name = "_v" + std::to_string(values_.size());
  if (by_name_.count(name)) throw GraphError("value '" + name + "' is defined twice");
  const auto id = static_cast<ValueId>(values_.size());
  Value v;
  v.name = name;
  v.type = type;
  v.shape = std::move(shape);
  values_.push_back(std::move(v));
  by_name_[values_.back().name] = id;
  return id;
}

ValueId Graph::add_constant(std::string name, Tensor t) {
  Dims d;
  for (auto s : t.shape) d.push_back(Dim::of(s));
  const ValueId id = add_value(std::move(name), t.type, d);
  values_[static_cast<std::size_t>(id)].constant = std::move(t);
  return id;
}

std::vector<std::string> Node::sources() const {
  if (!origin.empty()) return origin;
  return {(domain.empty() ? "" : domain + ".") + op_type + " " + name};
}

NodeId Graph::add_node(Node n) {
  const auto id = static_cast<NodeId>(nodes_.size());
  if (n.name.empty()) n.name = n.op_type + "_" + std::to_string(id);
  if (n.origin.empty()) n.origin = std::move(removed_);
  removed_.clear();
  for (ValueId in : n.inputs) {
    if (in == kNoValue) continue;
    value(in).consumers.push_back(id);
  }
  for (ValueId out : n.outputs) {
    Value& v = value(out);
    if (v.producer == id) throw GraphError("node '" + n.name + "' lists its output '" + v.name + "' twice");
    if (v.producer >= 0 && nodes_[static_cast<std::size_t>(v.producer)].alive)
      throw GraphError("value '" + v.name + "' is produced by both node '" + nodes_[static_cast<std::size_t>(v.producer)].name +
                       "' and node '" + n.name + "'");
    v.producer = id;
  }
  nodes_.push_back(std::move(n));
  return id;
}

void Graph::remove_node(NodeId id) {
  Node& n = node(id);
  if (!n.alive) return;
  for (ValueId in : n.inputs) {
    if (in == kNoValue) continue;
    auto& c = value(in).consumers;
    const auto it = std::find(c.begin(), c.end(), id);
    if (it != c.end()) c.erase(it);
  }
  for (ValueId out : n.outputs)
    if (value(out).producer == id) value(out).producer = -1;
  n.alive = false;
  for (std::string& s : n.sources()) removed_.push_back(std::move(s));
}

void Graph::replace_uses(ValueId from, ValueId to) {
  if (from == to) return;
  Value& f = value(from);
  for (NodeId c : f.consumers) {
    for (ValueId& in : node(c).inputs)
      if (in == from) in = to;
    value(to).consumers.push_back(c);
  }
  // A node using `from` twice was listed twice and moved twice: the counts match.
  f.consumers.clear();
  for (ValueId& o : outputs)
    if (o == from) o = to;
}

void Graph::compact() {
  std::vector<NodeId> remap(nodes_.size(), -1);
  std::vector<Node> kept;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].alive) continue;
    remap[i] = static_cast<NodeId>(kept.size());
    kept.push_back(std::move(nodes_[i]));
  }
  nodes_ = std::move(kept);
  for (Value& v : values_) {
    v.producer = v.producer >= 0 ? remap[static_cast<std::size_t>(v.producer)] : -1;
    for (NodeId& c : v.consumers) c = remap[static_cast<std::size_t>(c)];
    v.consumers.erase(std::remove(v.consumers.begin(), v.consumers.end(), -1), v.consumers.end());
  }
}

Value& Graph::value(ValueId id) {
  if (id < 0 || static_cast<std::size_t>(id) >= values_.size()) throw GraphError("no value with id " + std::to_string(id));
  return values_[static_cast<std::size_t>(id)];
}
const Value& Graph::value(ValueId id) const { return const_cast<Graph*>(this)->value(id); }
Node& Graph::node(NodeId id) {
  if (id < 0 || static_cast<std::size_t>(id) >= nodes_.size()) throw GraphError("no node with id " + std::to_string(id));
  return nodes_[static_cast<std::size_t>(id)];
}
const Node& Graph::node(NodeId id) const { return const_cast<Graph*>(this)->node(id); }

std::size_t Graph::live_nodes() const {
  return static_cast<std::size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.alive; }));
}

ValueId Graph::find_value(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoValue : it->second;
}

std::vector<ValueId> Graph::inputs_reaching(ValueId v, const std::function<bool(const Node&)>& through) const {
  std::vector<bool> seen(values_.size(), false);
  std::vector<ValueId> todo{v};
  while (!todo.empty()) {
    const ValueId x = todo.back();
    todo.pop_back();
    if (x == kNoValue || seen[static_cast<std::size_t>(x)]) continue;
    seen[static_cast<std::size_t>(x)] = true;
    const Value& val = value(x);
    if (val.constant || val.producer < 0 || (through && !through(node(val.producer)))) continue;
    for (const ValueId in : node(val.producer).inputs) todo.push_back(in);
  }
  std::vector<ValueId> out;
  for (const ValueId in : inputs)
    if (seen[static_cast<std::size_t>(in)] && !value(in).constant) out.push_back(in);
  return out;
}

std::vector<NodeId> Graph::topo_order() const {
  // Kahn's algorithm over live nodes, in insertion order among the ready ones (stable for the same graph).
  std::vector<int> pending(nodes_.size(), 0);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].alive) continue;
    for (ValueId in : nodes_[i].inputs) {
      if (in == kNoValue) continue;
      const NodeId p = values_[static_cast<std::size_t>(in)].producer;
      if (p >= 0 && nodes_[static_cast<std::size_t>(p)].alive) ++pending[i];
    }
  }
  std::vector<NodeId> ready, order;
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].alive && pending[i] == 0) ready.push_back(static_cast<NodeId>(i));
  for (std::size_t head = 0; head < ready.size(); ++head) {
    const NodeId n = ready[head];
    order.push_back(n);
    for (ValueId out : nodes_[static_cast<std::size_t>(n)].outputs)
      for (NodeId c : values_[static_cast<std::size_t>(out)].consumers)
        if (--pending[static_cast<std::size_t>(c)] == 0) ready.push_back(c);
  }
  if (order.size() != live_nodes()) {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].alive && pending[i] > 0)
        throw GraphError("the graph has a cycle through node '" + nodes_[i].name + "' (" + nodes_[i].op_type + ")");
  }
  return order;
}

void Graph::verify() const {
  std::vector<bool> is_input(values_.size(), false);
  for (ValueId in : inputs) is_input.at(static_cast<std::size_t>(in)) = true;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.alive) continue;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const ValueId in = n.inputs[k];
      if (in == kNoValue) continue;
      if (in < 0 || static_cast<std::size_t>(in) >= values_.size())
        throw GraphError("node '" + n.name + "' (" + n.op_type + "): input " + std::to_string(k) + " is not a value");
      const Value& v = values_[static_cast<std::size_t>(in)];
      const bool produced = (v.producer >= 0 && nodes_[static_cast<std::size_t>(v.producer)].alive) || v.constant ||
                            is_input[static_cast<std::size_t>(in)];
      if (!produced)
        throw GraphError("node '" + n.name + "' (" + n.op_type + "): input '" + v.name + "' is produced by nothing");
      if (std::count(v.consumers.begin(), v.consumers.end(), static_cast<NodeId>(i)) !=
          std::count(n.inputs.begin(), n.inputs.end(), in))
        throw GraphError("value '" + v.name + "': its consumer list does not match node '" + n.name + "'");
    }
    for (ValueId out : n.outputs) {
      const Value& v = value(out);
      if (v.producer != static_cast<NodeId>(i))
        throw GraphError("value '" + v.name + "' names a different producer than node '" + n.name + "'");
      if (is_input[static_cast<std::size_t>(out)] || v.constant)
        throw GraphError("node '" + n.name + "' writes '" + v.name + "', which is a graph input or a constant");
    }
  }
  for (ValueId o : outputs) {
    const Value& v = value(o);
    const bool produced = (v.producer >= 0 && nodes_[static_cast<std::size_t>(v.producer)].alive) || v.constant ||
                          is_input[static_cast<std::size_t>(o)];
    if (!produced) throw GraphError("graph output '" + v.name + "' is produced by nothing");
  }
  (void)topo_order();
}

}  // namespace npusim::stack::graph
