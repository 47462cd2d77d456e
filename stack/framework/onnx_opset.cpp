// Opset-18..21 models -> the opset-17 forms the graph engine reads (onnx_model.hpp). PyTorch 2.x's default exporter
// (torch.onnx.export with dynamo=True) writes opset 18 or newer: 20 in PyTorch 2.13. What changed after 17, by op
// (ONNX's Changelog.md), and what import does with it:
//   Reduce{Max,Mean,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}-18: axes moved from an attribute to input 1, and
//     noop_with_empty_axes was added (ReduceSum made the same move at 13, which the engine reads already)
//     -> constant axes back into the attribute; no axes with noop_with_empty_axes=1 -> Identity.
//   Split-18: num_outputs (equal parts, the last smaller) -> opset 13's even split into the outputs, or explicit
//     sizes when the input's dim is known and does not divide.
//   Cast-19/21, CastLike-19/21: saturate, which only applies to float8 targets -> dropped.
//   Gelu-20 (new) -> npusim.Gelu, the op fuse_gelu makes, with its schema registered for ONNX's shape inference.
//   Type lists only (Reshape, Shape, Size, Identity, Constant, ConstantOfShape, Equal, Flatten, Squeeze, Unsqueeze,
//     Transpose, Pad-21, ReduceMax/Min-20 with bool): the form is the same, nothing to do.
//   Ops new after 17 (Mish, GroupNormalization, Col2Im, ...) and ops the engine does not run at any opset (Pad,
//     Resize, ScatterND...) stay as they are; lowering lists them as unsupported.
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "common/util/error.hpp"
#include "stack/framework/onnx_model.hpp"

namespace npusim::stack::framework {

namespace {

constexpr const char* kDomain = "npusim";

// npusim.Gelu for ONNX's shape inference: elementwise, the output has the input's type and shape.
void register_npusim_schemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    onnx::OpSchemaRegistry::DomainToVersionRange::Instance().AddDomainToVersion(kDomain, 1, 1);
    onnx::OpSchema gelu;
    gelu.SetName("Gelu")
        .SetDomain(kDomain)
        .SinceVersion(1)
        .Attr("approximate", "none (erf) or tanh", onnx::AttributeProto::STRING, std::string("none"))
        .Input(0, "X", "input", "T")
        .Output(0, "Y", "output", "T")
        .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(bfloat16)", "tensor(double)"}, "floats")
        .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
    onnx::RegisterSchema(std::move(gelu));
  });
}

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The integers of an INT64 or INT32 tensor (raw or typed data); nullopt for another type or stored externally.
std::optional<std::vector<std::int64_t>> ints_of(const onnx::TensorProto& t) {
  std::vector<std::int64_t> out;
  if (t.data_type() == onnx::TensorProto::INT64) {
    if (t.has_raw_data()) {
      out.resize(t.raw_data().size() / 8);
      std::memcpy(out.data(), t.raw_data().data(), out.size() * 8);
    } else {
      out.assign(t.int64_data().begin(), t.int64_data().end());
    }
  } else if (t.data_type() == onnx::TensorProto::INT32) {
    if (t.has_raw_data()) {
      std::vector<std::int32_t> v(t.raw_data().size() / 4);
      std::memcpy(v.data(), t.raw_data().data(), v.size() * 4);
      out.assign(v.begin(), v.end());
    } else {
      out.assign(t.int32_data().begin(), t.int32_data().end());
    }
  } else {
    return std::nullopt;
  }
  return out;
}

class Adapter {
 public:
  Adapter(onnx::ModelProto& model, const std::string& what) : g_(*model.mutable_graph()), what_(what) {
    for (const auto& t : g_.initializer()) constants_[t.name()] = &t;
    for (const auto& n : g_.node()) {
      if (n.op_type() != "Constant" || !is_default_domain(n.domain()) || n.output_size() != 1) continue;
      for (const auto& a : n.attribute()) {
        if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) constants_[n.output(0)] = &a.t();
        if (a.name() == "value_ints") constant_ints_[n.output(0)].assign(a.ints().begin(), a.ints().end());
      }
    }
    auto shapes = [&](const auto& infos) {
      for (const auto& vi : infos) {
        if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
        std::vector<std::int64_t> d;
        for (const auto& dim : vi.type().tensor_type().shape().dim()) d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
        shapes_[vi.name()] = d;
      }
    };
    shapes(g_.input());
    shapes(g_.value_info());
    for (const auto& t : g_.initializer()) shapes_[t.name()] = {t.dims().begin(), t.dims().end()};
  }

  int run() {
    int rewritten = 0;
    for (auto& n : *g_.mutable_node())
      if (is_default_domain(n.domain()) && adapt(n)) ++rewritten;
    return rewritten;
  }

  bool used_npusim_domain() const { return npusim_nodes_ > 0; }

 private:
  std::string where(const onnx::NodeProto& n) const {
    return what_ + ": node '" + (n.name().empty() ? n.op_type() : n.name()) + "' (" + n.op_type() + ")";
  }

  std::optional<std::vector<std::int64_t>> constant(const std::string& name) const {
    if (const auto it = constant_ints_.find(name); it != constant_ints_.end()) return it->second;
    if (const auto it = constants_.find(name); it != constants_.end()) return ints_of(*it->second);
    return std::nullopt;
  }

  static void drop_attribute(onnx::NodeProto& n, const std::string& name) {
    auto* attrs = n.mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i)
      if (attrs->Get(i).name() == name) {
        attrs->DeleteSubrange(i, 1);
        return;
      }
  }

  static const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }

  bool adapt(onnx::NodeProto& n) {
    static const std::set<std::string> reductions = {"ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceL1",
                                                     "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
    const std::string& op = n.op_type();
    if (reductions.count(op)) return reduction(n);
    if (op == "Split") return split(n);
    if (op == "Cast" || op == "CastLike") {
      if (!attribute(n, "saturate")) return false;
      drop_attribute(n, "saturate");
      return true;
    }
    if (op == "Gelu") {
      n.set_domain(kDomain);
      ++npusim_nodes_;
      return true;
    }
    return false;
  }

  bool reduction(onnx::NodeProto& n) {
    const onnx::AttributeProto* noop = attribute(n, "noop_with_empty_axes");
    const bool keep_input = noop && noop->i() != 0;
    std::vector<std::int64_t> axes;
    if (n.input_size() > 1 && !n.input(1).empty()) {
      const auto c = constant(n.input(1));
      if (!c) throw InputError(where(n) + ": its axes ('" + n.input(1) + "') must be a constant (npusim reads reductions over fixed axes)");
      axes = *c;
    }
    if (n.input_size() > 1) n.mutable_input()->DeleteSubrange(1, n.input_size() - 1);
    drop_attribute(n, "noop_with_empty_axes");
    if (axes.empty() && keep_input) {  // no axes and noop_with_empty_axes: the input itself
      n.set_op_type("Identity");
      n.clear_attribute();
      return true;
    }
    if (!axes.empty()) {
      onnx::AttributeProto* a = n.add_attribute();
      a->set_name("axes");
      a->set_type(onnx::AttributeProto::INTS);
      for (auto v : axes) a->add_ints(v);
    }
    return true;
  }

  bool split(onnx::NodeProto& n) {
    const onnx::AttributeProto* parts = attribute(n, "num_outputs");
    if (!parts) return false;
    const std::int64_t count = parts->i();
    if (count != n.output_size()) throw InputError(where(n) + ": num_outputs " + std::to_string(count) + " but " + std::to_string(n.output_size()) + " outputs");
    const onnx::AttributeProto* axis_attr = attribute(n, "axis");
    const std::int64_t axis = axis_attr ? axis_attr->i() : 0;
    drop_attribute(n, "num_outputs");
    // Opset 18 splits into parts of ceil(dim / n), the last smaller; opset 13 without sizes splits evenly. They differ
    // only when n does not divide the dim, which then needs explicit sizes, when the dim is known.
    const auto it = shapes_.find(n.input(0));
    if (it == shapes_.end()) return true;
    const auto& shape = it->second;
    const std::int64_t rank = static_cast<std::int64_t>(shape.size()), a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank || shape[static_cast<std::size_t>(a)] < 0 || shape[static_cast<std::size_t>(a)] % count == 0) return true;
    const std::int64_t dim = shape[static_cast<std::size_t>(a)], chunk = (dim + count - 1) / count;
    std::vector<std::int64_t> sizes;
    for (std::int64_t k = 0, left = dim; k < count; ++k, left -= chunk) sizes.push_back(std::max<std::int64_t>(0, std::min(chunk, left)));
    onnx::TensorProto* t = g_.add_initializer();
    t->set_name(n.output(0) + "/split_sizes");
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(count);
    for (auto s : sizes) t->add_int64_data(s);
    if (n.input_size() < 2) n.add_input(t->name());
    else n.set_input(1, t->name());
    return true;
  }

  onnx::GraphProto& g_;
  const std::string& what_;
  std::map<std::string, const onnx::TensorProto*> constants_;
  std::map<std::string, std::vector<std::int64_t>> constant_ints_;
  std::map<std::string, std::vector<std::int64_t>> shapes_;
  int npusim_nodes_ = 0;
};

}  // namespace

int adapt_to_engine_opset(onnx::ModelProto& model, const std::string& what) {
  onnx::OperatorSetIdProto* default_import = nullptr;
  for (auto& op : *model.mutable_opset_import())
    if (is_default_domain(op.domain())) default_import = &op;
  if (!default_import || default_import->version() <= kEngineOpset) return 0;
  const std::int64_t version = default_import->version();
  if (version > kNewestOpset)
    throw InputError(what + ": opset " + std::to_string(version) + " is newer than npusim reads (up to " + std::to_string(kNewestOpset) +
                     "; export with opset_version=" + std::to_string(kNewestOpset) + " or lower)");
  Adapter adapter(model, what);
  const int rewritten = adapter.run();
  default_import->set_version(kEngineOpset);
  if (adapter.used_npusim_domain()) {
    register_npusim_schemas();
    bool listed = false;
    for (const auto& op : model.opset_import()) listed = listed || op.domain() == kDomain;
    if (!listed) {
      onnx::OperatorSetIdProto* imp = model.add_opset_import();
      imp->set_domain(kDomain);
      imp->set_version(1);
    }
  }
  return rewritten;
}

}  // namespace npusim::stack::framework
