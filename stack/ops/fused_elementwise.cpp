// A fused elementwise kernel: one expression over up to eight inputs, computed tile by tile in fp32 in the UB, so a
// chain of elementwise nodes (a residual add, SiLU times a gate, a masked fill...) reads its inputs and writes its
// output once instead of once per node. This is the graph engine's vector-fusion target (fuse_elementwise) and the
// lowering of ONNX Where and of Pow with small integer exponents.
//
// The expression (-p expr=...) is a call tree over the inputs x0..x7 and numeric literals (inf, -inf allowed):
//   binary   add sub mul div max min
//   unary    neg exp log sqrt rsqrt abs reciprocal relu sigmoid tanh erf gelu gelu_tanh silu
//   select   where(c, a, b) = c != 0 ? a : b
// e.g. mul(silu(x0), x1), add(x0, mul(x1, 0.5)), where(x0, -inf, x1).
// Input k has the output's shape or the shape of its trailing dims (-p shape_xK=...): it then repeats with that
// period, and tiles are cut so that no tile crosses a repetition.
//
// The host compiles the tree into a straight-line program over fp32 tile registers (a register is reused as soon as
// its value is dead, so the UB holds as few as the expression needs), and the tile size follows from the UB size
// and that register count.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <memory>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

constexpr std::size_t kMaxInputs = 8;

enum class Fn : std::uint8_t {
  kInput, kConst,
  kAdd, kSub, kMul, kDiv, kMax, kMin,
  kNeg, kExp, kLog, kSqrt, kRsqrt, kAbs, kReciprocal, kRelu, kSigmoid, kTanh, kErf, kGelu, kGeluTanh, kSilu,
  kWhere,
};

struct FnInfo {
  const char* name;
  Fn fn;
  int arity;
};
constexpr FnInfo kFns[] = {
    {"add", Fn::kAdd, 2}, {"sub", Fn::kSub, 2}, {"mul", Fn::kMul, 2}, {"div", Fn::kDiv, 2}, {"max", Fn::kMax, 2},
    {"min", Fn::kMin, 2}, {"neg", Fn::kNeg, 1}, {"exp", Fn::kExp, 1}, {"log", Fn::kLog, 1}, {"sqrt", Fn::kSqrt, 1},
    {"rsqrt", Fn::kRsqrt, 1}, {"abs", Fn::kAbs, 1}, {"reciprocal", Fn::kReciprocal, 1}, {"relu", Fn::kRelu, 1},
    {"sigmoid", Fn::kSigmoid, 1}, {"tanh", Fn::kTanh, 1}, {"erf", Fn::kErf, 1}, {"gelu", Fn::kGelu, 1},
    {"gelu_tanh", Fn::kGeluTanh, 1}, {"silu", Fn::kSilu, 1}, {"where", Fn::kWhere, 3}};

struct Expr {
  Fn fn = Fn::kConst;
  std::size_t input = 0;  // kInput
  double value = 0;       // kConst
  std::vector<std::shared_ptr<Expr>> args;
};
using ExprPtr = std::shared_ptr<Expr>;

class Parser {
 public:
  explicit Parser(std::string text) : s_(std::move(text)) {}
  ExprPtr parse() {
    ExprPtr e = term();
    skip();
    if (i_ != s_.size()) fail("unexpected '" + s_.substr(i_, 8) + "'");
    return e;
  }
  std::size_t inputs = 0;  // 1 + the highest input index used

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError("fused_elementwise: expr '" + s_ + "' at character " + std::to_string(i_ + 1) + ": " + what);
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  ExprPtr term() {
    skip();
    if (i_ >= s_.size()) fail("an expression is missing");
    const std::size_t start = i_;
    if (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_') {
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
      const std::string word = s_.substr(start, i_ - start);
      if (word == "inf") return constant(INFINITY);
      if (word.size() >= 2 && word[0] == 'x' && std::all_of(word.begin() + 1, word.end(), ::isdigit)) {
        const std::size_t k = std::stoul(word.substr(1));
        if (k >= kMaxInputs) fail("input " + word + ": at most " + std::to_string(kMaxInputs) + " inputs (x0..x7)");
        auto e = std::make_shared<Expr>();
        e->fn = Fn::kInput;
        e->input = k;
        inputs = std::max(inputs, k + 1);
        return e;
      }
      const FnInfo* info = nullptr;
      for (const FnInfo& f : kFns)
        if (word == f.name) info = &f;
      if (!info) fail("unknown function '" + word + "'");
      skip();
      if (i_ >= s_.size() || s_[i_] != '(') fail("'(' expected after " + word);
      ++i_;
      auto e = std::make_shared<Expr>();
      e->fn = info->fn;
      for (int a = 0; a < info->arity; ++a) {
        if (a) {
          skip();
          if (i_ >= s_.size() || s_[i_] != ',') fail(word + " takes " + std::to_string(info->arity) + " arguments");
          ++i_;
        }
        e->args.push_back(term());
      }
      skip();
      if (i_ >= s_.size() || s_[i_] != ')') fail(word + " takes " + std::to_string(info->arity) + " arguments");
      ++i_;
      return e;
    }
    if (s_.compare(i_, 4, "-inf") == 0) {
      i_ += 4;
      return constant(-INFINITY);
    }
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s_.substr(i_), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (!used || !std::isfinite(v)) fail("a number, an input x0..x7 or a function expected");
    i_ += used;
    return constant(v);
  }
  static ExprPtr constant(double v) {
    auto e = std::make_shared<Expr>();
    e->fn = Fn::kConst;
    e->value = v;
    return e;
  }
  std::string s_;
  std::size_t i_ = 0;
};

// --- The compiled program ------------------------------------------------------------------------------------------

// An instruction over tile registers. Registers 0..inputs-1 hold the inputs (in fp32); the others are temporaries.
struct EwInstr {
  enum class Kind : std::uint8_t { kBinary, kScalar, kUnary, kActivate, kDup, kWhere, kCopy } kind;
  Fn fn = Fn::kAdd;
  int dst = 0, a = 0, b = 0, c = 0;
  float s = 0;
};

struct EwProgram {
  std::vector<EwInstr> code;
  int registers = 0;  // inputs + temporaries
  int result = 0;
  bool needs_mask = false;  // a where: compare bits and a zero register
  bool needs_scratch = false, three_scratch = false;
  std::size_t inputs = 0;
};

class Compiler {
 public:
  explicit Compiler(std::size_t inputs) { prog_.inputs = inputs; prog_.registers = static_cast<int>(inputs); }
  EwProgram run(const ExprPtr& root) {
    prog_.result = value(root);
    return std::move(prog_);
  }

 private:
  bool temp(int r) const { return r >= static_cast<int>(prog_.inputs); }
  int alloc() {
    if (!free_.empty()) {
      const int r = free_.back();
      free_.pop_back();
      return r;
    }
    return prog_.registers++;
  }
  void release(int r) {
    if (temp(r)) free_.push_back(r);
  }
  // A destination for the result of operands `ops`: the first temporary among them (elementwise ops may write in
  // place), else a new one; the other temporaries are released.
  int dest(std::initializer_list<int> ops) {
    int d = -1;
    for (int r : ops) {
      if (temp(r) && d < 0) d = r;
      else release(r);
    }
    return d >= 0 ? d : alloc();
  }
  void emit(EwInstr in) { prog_.code.push_back(in); }
  int constant(double v) {
    const int r = alloc();
    emit({EwInstr::Kind::kDup, Fn::kConst, r, 0, 0, 0, static_cast<float>(v)});
    return r;
  }
  int value(const ExprPtr& e) {
    switch (e->fn) {
      case Fn::kInput: return static_cast<int>(e->input);
      case Fn::kConst: return constant(e->value);
      case Fn::kWhere: {
        prog_.needs_mask = true;
        const int c = value(e->args[0]), a = value(e->args[1]), b = value(e->args[2]);
        const int d = dest({c, a, b});
        emit({EwInstr::Kind::kWhere, Fn::kWhere, d, a, b, c, 0});
        return d;
      }
      default: break;
    }
    if (e->args.size() == 2) {
      const ExprPtr &l = e->args[0], &r = e->args[1];
      // A literal operand of +, -, *, max, min goes into the instruction's scalar (a division keeps its exact
      // rounding: the literal is duplicated into a register).
      const bool lc = l->fn == Fn::kConst, rc = r->fn == Fn::kConst;
      if (rc && e->fn != Fn::kDiv) {
        const int x = value(l), d = dest({x});
        const double v = e->fn == Fn::kSub ? -r->value : r->value;
        emit({EwInstr::Kind::kScalar, e->fn == Fn::kSub ? Fn::kAdd : e->fn, d, x, 0, 0, static_cast<float>(v)});
        return d;
      }
      if (lc && e->fn != Fn::kDiv && e->fn != Fn::kSub) {
        const int x = value(r), d = dest({x});
        emit({EwInstr::Kind::kScalar, e->fn, d, x, 0, 0, static_cast<float>(l->value)});
        return d;
      }
      if (lc && e->fn == Fn::kDiv && l->value == 1.0) {
        const int x = value(r), d = dest({x});
        emit({EwInstr::Kind::kUnary, Fn::kReciprocal, d, x, 0, 0, 0});
        return d;
      }
      const int a = value(l), b = value(r), d = dest({a, b});
      emit({EwInstr::Kind::kBinary, e->fn, d, a, b, 0, 0});
      return d;
    }
    const int x = value(e->args[0]), d = dest({x});
    switch (e->fn) {
      case Fn::kNeg: emit({EwInstr::Kind::kScalar, Fn::kMul, d, x, 0, 0, -1.0f}); break;
      case Fn::kExp: case Fn::kLog: case Fn::kSqrt: case Fn::kRsqrt: case Fn::kAbs: case Fn::kReciprocal: case Fn::kRelu:
        emit({EwInstr::Kind::kUnary, e->fn, d, x, 0, 0, 0});
        break;
      default:  // composite activations run in place on the destination, with scratch registers
        if (d != x) emit({EwInstr::Kind::kCopy, Fn::kAdd, d, x, 0, 0, 0});
        emit({EwInstr::Kind::kActivate, e->fn, d, 0, 0, 0, 0});
        prog_.needs_scratch = true;
        if (e->fn == Fn::kGelu || e->fn == Fn::kErf) prog_.three_scratch = true;
        break;
    }
    return d;
  }
  EwProgram prog_;
  std::vector<int> free_;
};

Activation activation_of(Fn fn) {
  switch (fn) {
    case Fn::kSigmoid: return Activation::kSigmoid;
    case Fn::kTanh: return Activation::kTanh;
    case Fn::kErf: return Activation::kErf;
    case Fn::kGelu: return Activation::kGeluErf;
    case Fn::kGeluTanh: return Activation::kGeluTanh;
    case Fn::kSilu: return Activation::kSilu;
    default: return Activation::kNone;
  }
}

// --- Device side ---------------------------------------------------------------------------------------------------

struct EwArgs {
  std::shared_ptr<const EwProgram> prog;
  std::vector<std::uint64_t> period;  // per input: elements before it repeats (n: no broadcast)
  std::vector<GM_ADDR> in;
  GM_ADDR out = 0;
  std::uint64_t n = 0, per_block = 0, tile = 0;
};

void run_program(const EwProgram& p, const std::vector<LocalTensor<float>>& r, const LocalTensor<float>& scratch_a,
                 const LocalTensor<float>& scratch_b, const LocalTensor<float>& scratch_c, const LocalTensor<std::uint8_t>& bits,
                 const LocalTensor<float>& zero, std::uint64_t len) {
  const std::uint64_t len256 = ceil_to(len, 256);  // Compare/Select take whole 32 B blocks of bit mask
  for (const EwInstr& in : p.code) {
    const LocalTensor<float>& d = r[static_cast<std::size_t>(in.dst)];
    const LocalTensor<float>& a = r[static_cast<std::size_t>(in.a)];
    const LocalTensor<float>& b = r[static_cast<std::size_t>(in.b)];
    switch (in.kind) {
      case EwInstr::Kind::kBinary:
        switch (in.fn) {
          case Fn::kAdd: Add(d, a, b, len); break;
          case Fn::kSub: Sub(d, a, b, len); break;
          case Fn::kMul: Mul(d, a, b, len); break;
          case Fn::kDiv: Div(d, a, b, len); break;
          case Fn::kMax: Max(d, a, b, len); break;
          default: Min(d, a, b, len); break;
        }
        break;
      case EwInstr::Kind::kScalar:
        switch (in.fn) {
          case Fn::kAdd: Adds(d, a, in.s, len); break;
          case Fn::kMul: Muls(d, a, in.s, len); break;
          case Fn::kMax: Maxs(d, a, in.s, len); break;
          default: Mins(d, a, in.s, len); break;
        }
        break;
      case EwInstr::Kind::kUnary:
        switch (in.fn) {
          case Fn::kExp: Exp(d, a, len); break;
          case Fn::kLog: Ln(d, a, len); break;
          case Fn::kSqrt: Sqrt(d, a, len); break;
          case Fn::kRsqrt: Rsqrt(d, a, len); break;
          case Fn::kAbs: Abs(d, a, len); break;
          case Fn::kReciprocal: Reciprocal(d, a, len); break;
          default: Relu(d, a, len); break;
        }
        break;
      case EwInstr::Kind::kActivate: activate(activation_of(in.fn), d, scratch_a, scratch_b, scratch_c, len); break;
      case EwInstr::Kind::kCopy: Adds(d, a, 0.0f, len); break;
      case EwInstr::Kind::kDup: Duplicate(d, in.s, len); break;
      case EwInstr::Kind::kWhere:
        Compare(bits, r[static_cast<std::size_t>(in.c)], zero, CMPMODE::NE, len256);
        Select(d, bits, a, b, len256);
        break;
    }
  }
}

template <class T>
void ew_kernel(const EwArgs& g) {
  const std::uint64_t first = GetBlockIdx() * g.per_block;
  if (first >= g.n) return;
  const EwProgram& p = *g.prog;
  const std::uint64_t count = std::min(g.per_block, g.n - first), es = sizeof(T), tile = g.tile;
  constexpr bool f32 = std::is_same_v<T, float>;
  const std::size_t k = p.inputs;
  TPipe pipe;
  // One double-buffered VECIN queue holds every input's tile (k pieces per buffer), so the queue count, and with
  // it the event ids, do not grow with the inputs.
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  const std::uint64_t piece = ceil_to(tile * es, 32) / es;
  pipe.InitBuffer(qin, 2, k * piece * es);
  pipe.InitBuffer(qout, 2, piece * es);
  const std::uint64_t regs = static_cast<std::uint64_t>(p.registers) - (f32 ? k : 0);
  TBuf<TPosition::VECCALC> fregs, fscratch, fbits, fzero;
  const std::uint64_t rt = ceil_to(tile, 256);  // register elements (Compare/Select work on 256-element blocks)
  if (regs) pipe.InitBuffer(fregs, regs * rt * 4);
  const std::uint64_t scratch = p.three_scratch ? 3 : p.needs_scratch ? 2 : 0;
  if (scratch) pipe.InitBuffer(fscratch, scratch * rt * 4);
  LocalTensor<float> zero;
  LocalTensor<std::uint8_t> bits;
  if (p.needs_mask) {
    pipe.InitBuffer(fbits, rt / 8);
    pipe.InitBuffer(fzero, rt * 4);
    bits = fbits.Get<std::uint8_t>();
    zero = fzero.Get<float>();
    Duplicate(zero, 0.0f, rt);
  }
  std::vector<LocalTensor<float>> r(static_cast<std::size_t>(p.registers));
  const LocalTensor<float> sa = scratch ? fscratch.Get<float>() : LocalTensor<float>{};
  const LocalTensor<float> sb = scratch ? fscratch.Get<float>()[rt] : sa;
  const LocalTensor<float> sc = scratch == 3 ? fscratch.Get<float>()[2 * rt] : sa;
  for (std::size_t i = f32 ? k : 0, slot = 0; i < r.size(); ++i, ++slot) r[i] = fregs.Get<float>()[slot * rt];
  for (std::uint64_t off = 0; off < count;) {
    const std::uint64_t at = first + off;
    std::uint64_t len = std::min(tile, count - off);
    for (std::size_t i = 0; i < k; ++i) len = std::min(len, g.period[i] - at % g.period[i]);  // no tile crosses a repetition
    LocalTensor<T> in = qin.AllocTensor<T>();
    for (std::size_t i = 0; i < k; ++i) copy_in(in[i * piece], g.in[i] + (at % g.period[i]) * es, len);
    qin.EnQue(in);
    in = qin.DeQue<T>();
    for (std::size_t i = 0; i < k; ++i) {
      if constexpr (f32) r[i] = in[i * piece];
      else convert(r[i], in[i * piece], len);
    }
    if constexpr (!f32) qin.FreeTensor(in);
    run_program(p, r, sa, sb, sc, bits, zero, len);
    LocalTensor<T> out = qout.AllocTensor<T>();
    convert(out, r[static_cast<std::size_t>(p.result)], len);
    if constexpr (f32) qin.FreeTensor(in);  // fp32 inputs are registers themselves: free once the result is out
    qout.EnQue(out);
    out = qout.DeQue<T>();
    copy_out(g.out + at * es, out, len);
    qout.FreeTensor(out);
    off += len;
  }
}

// --- Host side -----------------------------------------------------------------------------------------------------

double eval(const Expr& e, const std::vector<double>& x) {
  auto arg = [&](std::size_t i) { return eval(*e.args[i], x); };
  switch (e.fn) {
    case Fn::kInput: return x[e.input];
    case Fn::kConst: return e.value;
    case Fn::kAdd: return arg(0) + arg(1);
    case Fn::kSub: return arg(0) - arg(1);
    case Fn::kMul: return arg(0) * arg(1);
    case Fn::kDiv: return arg(0) / arg(1);
    case Fn::kMax: return std::max(arg(0), arg(1));
    case Fn::kMin: return std::min(arg(0), arg(1));
    case Fn::kNeg: return -arg(0);
    case Fn::kExp: return std::exp(arg(0));
    case Fn::kLog: return std::log(arg(0));
    case Fn::kSqrt: return std::sqrt(arg(0));
    case Fn::kRsqrt: return 1.0 / std::sqrt(arg(0));
    case Fn::kAbs: return std::fabs(arg(0));
    case Fn::kReciprocal: return 1.0 / arg(0);
    case Fn::kRelu: return std::max(arg(0), 0.0);
    case Fn::kWhere: return arg(0) != 0 ? arg(1) : arg(2);
    default: return activate_ref(activation_of(e.fn), static_cast<float>(arg(0)));
  }
}

// The call's expression, compiled from its text, and the number of inputs it reads.
struct Parsed {
  ExprPtr expr;
  std::size_t inputs = 0;
};

Parsed parse_expr(const FusedElementwiseCall& c) {
  if (c.expr.empty()) throw InputError("fused_elementwise: no expression given, e.g. -p expr='mul(silu(x0),x1)'");
  check_shape(c.shape, "fused_elementwise: the output shape");
  Parser parser(c.expr);
  Parsed p;
  p.expr = parser.parse();
  p.inputs = parser.inputs;
  if (p.inputs == 0) throw InputError("fused_elementwise: expr '" + c.expr + "' reads no input");
  return p;
}

FusedElementwiseCall parse_call(const Params& p) {
  FusedElementwiseCall c;
  const auto it = p.find("expr");
  if (it == p.end()) throw InputError("fused_elementwise: parameter 'expr' is required, e.g. -p expr='mul(silu(x0),x1)'");
  c.expr = it->second;
  c.shape = param_shape(p);
  parse_expr(c);  // a syntax error is named before anything runs
  return c;
}

// Elements after which input shape `in` repeats within `out` (its trailing dims, leading 1s dropped).
std::uint64_t period_of(Shape in, const Shape& out, std::size_t k) {
  while (in.size() > 1 && in.front() == 1) in.erase(in.begin());
  if (in.size() > out.size() || !std::equal(in.begin(), in.end(), out.end() - static_cast<std::ptrdiff_t>(in.size())))
    throw InputError("fused_elementwise: input x" + std::to_string(k) + " of shape " + shape_string(in) +
                     " does not broadcast to " + shape_string(out) + " (it must match the trailing dims)");
  return elements(in);
}

OpDef fused_elementwise_op() {
  OpDef d;
  d.name = "fused_elementwise";
  d.summary = "one expression over up to 8 inputs in fp32 per tile, e.g. expr='mul(silu(x0),x1)' (inputs: the output shape, "
              "or trailing dims with -p shape_xK)";
  d.params = {"expr", "shape", "shape_x0", "shape_x1", "shape_x2", "shape_x3", "shape_x4", "shape_x5", "shape_x6", "shape_x7"};
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  // Input k has the output's shape, or -p shape_xK.
  d.inputs = [](const Params& p, DType t) {
    const FusedElementwiseCall call = parse_call(p);
    std::vector<TensorDesc> in;
    for (std::size_t i = 0; i < parse_expr(call).inputs; ++i) {
      const auto s = p.find("shape_x" + std::to_string(i));
      in.push_back({s == p.end() ? call.shape : parse_shape(s->second), t});
    }
    return in;
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const FusedElementwiseCall& fc = call_as<FusedElementwiseCall>(call, "fused_elementwise");
    const Parsed c = parse_expr(fc);
    if (in.size() != c.inputs)
      throw InputError("fused_elementwise: expr reads " + std::to_string(c.inputs) + " inputs, " + std::to_string(in.size()) + " given");
    const DType t = in[0].dtype;
    EwArgs a;
    a.n = elements(fc.shape);
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (in[i].dtype != t) throw InputError("fused_elementwise: the inputs differ in dtype");
      a.period.push_back(period_of(in[i].shape, fc.shape, i));
    }
    auto prog = std::make_shared<EwProgram>(Compiler(c.inputs).run(c.expr));
    const std::uint64_t es = hw::isa::dtype_bytes(t);
    const bool f32 = t == DType::kFp32;
    // UB per tile element: two buffers of every input and of the output in T, the fp32 registers and scratch, the
    // compare bits and the zero register of a where.
    const std::uint64_t regs = static_cast<std::uint64_t>(prog->registers) - (f32 ? c.inputs : 0);
    const std::uint64_t scratch = prog->three_scratch ? 3 : prog->needs_scratch ? 2 : 0;
    const double per_elem = static_cast<double>(2 * (c.inputs + 1) * es + 4 * (regs + scratch)) +
                            (prog->needs_mask ? 4.0 + 1.0 / 8 : 0.0);
    std::uint64_t tile = static_cast<std::uint64_t>(static_cast<double>(chip.buffers.ub.size - 1024) / per_elem);
    tile = std::min<std::uint64_t>(tile / 256 * 256, 63 * 256);
    if (tile == 0) throw InputError("fused_elementwise: the expression needs more UB than chip " + chip.name + " has");
    a.per_block = ceil_div(ceil_div(a.n, 32), chip.vector_units()) * 32;
    a.tile = std::min(tile, ceil_to(a.per_block, 256));
    a.prog = prog;
    OpPlan plan;
    plan.outputs = {{fc.shape, t}};
    plan.type = KernelType::kVector;
    plan.block_dim = u32(ceil_div(a.n, a.per_block));
    plan.tiling = {{"tile_elements", static_cast<double>(a.tile)}, {"per_block", static_cast<double>(a.per_block)},
                   {"registers", static_cast<double>(prog->registers)}, {"instructions", static_cast<double>(prog->code.size())}};
    plan.kernel = [a, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      EwArgs g = a;
      g.in.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(g.period.size()));
      g.out = buf[g.period.size()];
      switch (t) {
        case DType::kFp16: return [g] { ew_kernel<half>(g); };
        case DType::kBf16: return [g] { ew_kernel<bfloat16_t>(g); };
        default: return [g] { ew_kernel<float>(g); };
      }
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>&, const Call& call, const std::vector<HostTensor>& v) {
    const FusedElementwiseCall& fc = call_as<FusedElementwiseCall>(call, "fused_elementwise");
    const Parsed c = parse_expr(fc);
    const std::uint64_t n = elements(fc.shape);
    HostTensor out(n);
    std::vector<double> x(c.inputs);
    for (std::uint64_t e = 0; e < n; ++e) {
      for (std::size_t i = 0; i < c.inputs; ++i) x[i] = v[i][e % v[i].size()];
      out[e] = static_cast<float>(eval(*c.expr, x));
    }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> fused_ops() { return {fused_elementwise_op()}; }

}  // namespace npusim::stack::ops
