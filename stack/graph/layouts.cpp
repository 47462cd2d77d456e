// NC1HWC0 across the program (layouts.hpp): the NCHW <-> NC1HWC0 conversions the convolutions and pooling bring are
// removed where a tensor's NC1HWC0 form already exists, and elementwise steps between them run on that form, as
// CANN keeps a CNN's activations in NC1HWC0 between its Cube and vector kernels.
#include "stack/graph/layouts.hpp"

#include <map>
#include <set>

namespace npusim::stack::graph {

namespace {

using hw::isa::DType;

bool elementwise(const std::string& op) {
  static const std::set<std::string> ops = {"add",       "sub",        "mul",     "div",  "relu", "gelu",
                                            "gelu_tanh", "silu",       "exp",     "log",  "sqrt", "abs",
                                            "neg",       "reciprocal", "sigmoid", "tanh", "erf",  "fused_elementwise"};
  return ops.count(op) > 0;
}

// Whether the step maps zeros to zero: the padded channels of NC1HWC0 hold 0 and must keep holding 0 through a chain
// of such steps (a convolution reads them against zero weights, which an inf or NaN there would turn into NaN, and a
// pooling or reduction of a later conversion must not see them either). Asked of the op's own reference on
// one-element zero inputs. Relu, a ReLU6 Clip, a residual Add keep 0; exp or sigmoid do not and stay in NCHW.
bool keeps_zero(const Step& st, DType t) {
  const ops::OpDef* op = ops::find_op(st.op);
  if (!op || !op->reference) return false;
  ops::Call call = st.call;
  if (auto* f = std::get_if<ops::FusedElementwiseCall>(&call)) f->shape = {1};
  const std::vector<ops::TensorDesc> in(st.inputs.size(), ops::TensorDesc{{1}, t});
  try {
    for (const ops::HostTensor& out : op->reference(in, call, std::vector<ops::HostTensor>(in.size(), {0.0f})))
      for (float v : out)
        if (v != 0.0f) return false;
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

bool is(const Step& st, const char* op, bool to_5hd) {
  if (st.op != op) return false;
  const auto* c = std::get_if<ops::TransDataCall>(&st.call);
  return c && c->to_5hd == to_5hd;
}

class Propagation {
 public:
  explicit Propagation(Program& p) : p_(p) {}

  void run() {
    std::vector<Step> steps;
    steps.swap(p_.steps);
    for (Step& st : steps) {
      for (int& i : st.inputs)
        if (const auto it = same_.find(i); it != same_.end()) i = it->second;
      if (is(st, "trans_data", true)) {
        if (const int hd = nc1hwc0(st.inputs[0]); hd >= 0) {  // already there: its users read that tensor
          same_[st.outputs[0]] = hd;
          continue;
        }
      } else if (is(st, "trans_data", false)) {
        hd_[st.outputs[0]] = st.inputs[0];
      } else if (st.op == "cast" && nc1hwc0(st.inputs[0]) >= 0 && exact(st)) {
        hd_[st.outputs[0]] = nc1hwc0(st.inputs[0]);
      } else if (rewrite(st)) {
        continue;
      }
      p_.steps.push_back(std::move(st));
    }
  }

 private:
  int nc1hwc0(int t) const {
    const auto it = hd_.find(t);
    return it == hd_.end() ? -1 : it->second;
  }
  const ops::TensorDesc& desc(int t) const { return p_.tensors[static_cast<std::size_t>(t)].desc; }

  // A cast between float32 and the 16-bit type of the input's NC1HWC0 form, of values that came from that form: no
  // rounding either way (a cast to another 16-bit type rounds, and its result is a tensor of that other type).
  bool exact(const Step& st) const {
    const DType from = desc(st.inputs[0]).dtype, to = desc(st.outputs[0]).dtype;
    const DType hd = desc(nc1hwc0(st.inputs[0])).dtype;
    return (from == DType::kFp32 && to == hd) || (from == hd && to == DType::kFp32);
  }

  int add_tensor(const std::string& name, ops::TensorDesc d) {
    p_.tensors.push_back(ProgramTensor{name, std::move(d), -1, {}});
    return static_cast<int>(p_.tensors.size()) - 1;
  }

  // An elementwise step whose every input has an NC1HWC0 form of the output's NCHW shape: the step on those forms,
  // which later convolutions and pooling read; and its NCHW output as before (dropped later when nothing reads it):
  // converted from the new form when the step ran in that 16-bit type anyway, else the original step itself, so that
  // a float32 output someone reads (a graph output, a reduction) keeps float32's range and precision.
  bool rewrite(const Step& st) {
    if (!elementwise(st.op) || !st.shapes.empty() || st.outputs.size() != 1 || st.inputs.empty()) return false;
    const int out = st.outputs[0];
    const ops::Shape& shape = desc(out).shape;
    if (shape.size() != 4) return false;
    std::vector<int> ins;
    for (int i : st.inputs) {
      const int hd = nc1hwc0(i);
      if (hd < 0 || desc(i).shape != shape || (!ins.empty() && desc(hd).dtype != desc(ins[0]).dtype)) return false;
      ins.push_back(hd);
    }
    const DType t = desc(ins[0]).dtype;
    if (!keeps_zero(st, t)) return false;
    if (const auto* f = std::get_if<ops::FusedElementwiseCall>(&st.call); f && f->to && *f->to != t)
      return false;  // a comparison or cast to another type: its output is not a form of the map
    Step on = st;
    on.inputs = ins;
    const int y5 = add_tensor(p_.tensors[static_cast<std::size_t>(out)].name + "/nc1hwc0", desc(ins[0]));
    on.outputs = {y5};
    if (auto* f = std::get_if<ops::FusedElementwiseCall>(&on.call)) f->shape = desc(y5).shape;
    p_.steps.push_back(std::move(on));
    if (desc(out).dtype == t)
      p_.steps.push_back(Step{st.node,
                              "trans_data",
                              ops::TransDataCall{false, static_cast<std::uint32_t>(shape[1])},
                              {y5},
                              {out},
                              {},
                              {},
                              st.sources});
    else
      p_.steps.push_back(st);
    hd_[out] = y5;
    return true;
  }

  Program& p_;
  std::map<int, int> hd_;    // NCHW tensor -> the NC1HWC0 tensor of its values (in the 16-bit type)
  std::map<int, int> same_;  // a dropped conversion's output -> the tensor its readers now read
};

}  // namespace

void propagate_nc1hwc0(Program& p) {
  Propagation(p).run();
}

}  // namespace npusim::stack::graph
