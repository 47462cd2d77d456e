// A fused elementwise kernel: one expression over up to eight inputs, computed tile by tile in fp32 in the UB, so a
// chain of elementwise nodes (a residual add, SiLU times a gate, a masked fill...) reads its inputs and writes its
// output once instead of once per node. This is the graph engine's vector-fusion target (fuse_elementwise) and the
// lowering of ONNX Where and of Pow with small integer exponents.
//
// The expression (-p expr=...) is a call tree over the inputs x0..x7 and numeric literals (inf, -inf, nan allowed):
//   binary   add sub mul div max min
//   unary    neg exp log sqrt rsqrt abs reciprocal relu floor sigmoid tanh erf gelu gelu_tanh silu
//            (floor: a cast to int32 rounding toward -inf and back, exact for |a| < 2^31)
//   select   where(c, a, b) = c != 0 ? a : b
//   compare  eq ne lt le gt ge (1 where it holds, else 0), isnan(a) = ne(a, a)
//   logic    and or xor (of a != 0 and b != 0), not(a) = eq(a, 0)
// e.g. mul(silu(x0), x1), add(x0, mul(x1, 0.5)), where(x0, -inf, x1), where(and(x0, ne(x1, 0)), 0, -inf).
// Inputs may differ in element type (fp16, bf16, fp32, int32, int8 -- a bool is an int8 of 0 or 1; -p dtype_xK),
// and the output may have its own (-p to=...; by default the first float input's, else input 0's): every input is
// converted to fp32 on the way in (int8 through fp16, as the hardware's Cast goes) and the result to the output
// type on the way out (to an integer: truncated toward zero, as ONNX's and C's casts do; through fp16 for int8).
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
  kInput,
  kConst,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kAbs,
  kReciprocal,
  kRelu,
  kFloor,
  kSigmoid,
  kTanh,
  kErf,
  kGelu,
  kGeluTanh,
  kSilu,
  kWhere,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kIsNan,
  kAnd,
  kOr,
  kXor,
  kNot,  // parsed only: rewritten into compares and min/max
};

struct FnInfo {
  const char* name;
  Fn fn;
  int arity;
};
constexpr FnInfo kFns[] = {{"add", Fn::kAdd, 2},
                           {"sub", Fn::kSub, 2},
                           {"mul", Fn::kMul, 2},
                           {"div", Fn::kDiv, 2},
                           {"max", Fn::kMax, 2},
                           {"min", Fn::kMin, 2},
                           {"neg", Fn::kNeg, 1},
                           {"exp", Fn::kExp, 1},
                           {"log", Fn::kLog, 1},
                           {"sqrt", Fn::kSqrt, 1},
                           {"rsqrt", Fn::kRsqrt, 1},
                           {"abs", Fn::kAbs, 1},
                           {"reciprocal", Fn::kReciprocal, 1},
                           {"relu", Fn::kRelu, 1},
                           {"floor", Fn::kFloor, 1},
                           {"sigmoid", Fn::kSigmoid, 1},
                           {"tanh", Fn::kTanh, 1},
                           {"erf", Fn::kErf, 1},
                           {"gelu", Fn::kGelu, 1},
                           {"gelu_tanh", Fn::kGeluTanh, 1},
                           {"silu", Fn::kSilu, 1},
                           {"where", Fn::kWhere, 3},
                           {"eq", Fn::kEq, 2},
                           {"ne", Fn::kNe, 2},
                           {"lt", Fn::kLt, 2},
                           {"le", Fn::kLe, 2},
                           {"gt", Fn::kGt, 2},
                           {"ge", Fn::kGe, 2},
                           {"isnan", Fn::kIsNan, 1},
                           {"and", Fn::kAnd, 2},
                           {"or", Fn::kOr, 2},
                           {"xor", Fn::kXor, 2},
                           {"not", Fn::kNot, 1}};

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
      if (word == "nan") return constant(NAN);
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
      return logic(e);
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
  static ExprPtr call(Fn fn, std::vector<ExprPtr> args) {
    auto e = std::make_shared<Expr>();
    e->fn = fn;
    e->args = std::move(args);
    return e;
  }
  // The logic functions as compares: a truth value is a != 0; and / or are the min / max of two 0-or-1 values.
  static ExprPtr logic(const ExprPtr& e) {
    const auto truth = [](const ExprPtr& a) { return call(Fn::kNe, {a, constant(0)}); };
    switch (e->fn) {
      case Fn::kAnd: return call(Fn::kMin, {truth(e->args[0]), truth(e->args[1])});
      case Fn::kOr: return call(Fn::kMax, {truth(e->args[0]), truth(e->args[1])});
      case Fn::kXor: return call(Fn::kNe, {truth(e->args[0]), truth(e->args[1])});
      case Fn::kNot: return call(Fn::kEq, {e->args[0], constant(0)});
      default: return e;
    }
  }
  std::string s_;
  std::size_t i_ = 0;
};

// --- The compiled program ------------------------------------------------------------------------------------------

// An instruction over tile registers. Registers 0..inputs-1 hold the inputs (in fp32); the others are temporaries.
struct EwInstr {
  enum class Kind : std::uint8_t { kBinary, kScalar, kUnary, kActivate, kDup, kWhere, kCompare, kCopy } kind;
  Fn fn = Fn::kAdd;
  int dst = 0, a = 0, b = 0, c = 0;
  float s = 0;
};

struct EwProgram {
  std::vector<EwInstr> code;
  int registers = 0;  // inputs + temporaries
  int result = 0;
  bool needs_mask = false;  // a where or a compare: compare bits and a zero register
  bool needs_one = false;   // a compare: a register of ones to select
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
      case Fn::kEq:
      case Fn::kNe:
      case Fn::kLt:
      case Fn::kLe:
      case Fn::kGt:
      case Fn::kGe:
      case Fn::kIsNan: {
        prog_.needs_mask = prog_.needs_one = true;
        const int a = value(e->args[0]);
        const int b = e->fn == Fn::kIsNan ? a : value(e->args[1]);
        const int d = e->fn == Fn::kIsNan ? dest({a}) : dest({a, b});
        emit({EwInstr::Kind::kCompare, e->fn, d, a, b, 0, 0});
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
      case Fn::kFloor: emit({EwInstr::Kind::kUnary, e->fn, d, x, 0, 0, 0}); break;
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
  std::vector<DType> in_type;
  DType out_type = DType::kFp32;
  std::vector<GM_ADDR> in;
  GM_ADDR out = 0;
  std::uint64_t n = 0, per_block = 0, tile = 0;
};

// The UB a tile needs around the program: the registers (fp32 inputs are registers themselves), the compare bits
// and the zero and one registers, and an fp16 staging row for int8 on either side.
struct EwBuffers {
  LocalTensor<float> scratch_a, scratch_b, scratch_c, zero, one;
  LocalTensor<std::uint8_t> bits;
  LocalTensor<half> stage;
};

CMPMODE cmp_mode(Fn fn) {
  switch (fn) {
    case Fn::kEq: return CMPMODE::EQ;
    case Fn::kLt: return CMPMODE::LT;
    case Fn::kLe: return CMPMODE::LE;
    case Fn::kGt: return CMPMODE::GT;
    case Fn::kGe: return CMPMODE::GE;
    default: return CMPMODE::NE;  // ne, isnan (x != x)
  }
}

void run_program(const EwProgram& p, const std::vector<LocalTensor<float>>& r, const EwBuffers& w, std::uint64_t len) {
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
          case Fn::kFloor:  // through int32 in the destination's own bytes
            Cast(d.ReinterpretCast<std::int32_t>(), a, RoundMode::CAST_FLOOR, len);
            Cast(d, d.ReinterpretCast<std::int32_t>(), RoundMode::CAST_NONE, len);
            break;
          default: Relu(d, a, len); break;
        }
        break;
      case EwInstr::Kind::kActivate:
        activate(activation_of(in.fn), d, w.scratch_a, w.scratch_b, w.scratch_c, len);
        break;
      case EwInstr::Kind::kCopy: Adds(d, a, 0.0f, len); break;
      case EwInstr::Kind::kDup: Duplicate(d, in.s, len); break;
      case EwInstr::Kind::kWhere:
        Compare(w.bits, r[static_cast<std::size_t>(in.c)], w.zero, CMPMODE::NE, len256);
        Select(d, w.bits, a, b, len256);
        break;
      case EwInstr::Kind::kCompare:
        Compare(w.bits, a, b, cmp_mode(in.fn), len256);
        Select(d, w.bits, w.one, w.zero, len256);
        break;
    }
  }
}

// Input tile `src` (type t, in the UB) as fp32 in register `dst`.
void widen_input(const LocalTensor<float>& dst, const LocalTensor<std::uint8_t>& src, DType t, const EwBuffers& w,
                 std::uint64_t len) {
  switch (t) {
    case DType::kFp16: convert(dst, src.ReinterpretCast<half>(), len); break;
    case DType::kBf16: convert(dst, src.ReinterpretCast<bfloat16_t>(), len); break;
    case DType::kInt32: Cast(dst, src.ReinterpretCast<std::int32_t>(), RoundMode::CAST_NONE, len); break;
    case DType::kInt8:  // the hardware converts s8 to f16 only
      Cast(w.stage, src.ReinterpretCast<std::int8_t>(), RoundMode::CAST_NONE, len);
      Cast(dst, w.stage, RoundMode::CAST_NONE, len);
      break;
    default: break;  // fp32 inputs are registers
  }
}

// The fp32 result as the output type into `dst`.
void narrow_output(const LocalTensor<std::uint8_t>& dst, const LocalTensor<float>& src, DType t, const EwBuffers& w,
                   std::uint64_t len) {
  switch (t) {
    case DType::kFp16: convert(dst.ReinterpretCast<half>(), src, len); break;
    case DType::kBf16: convert(dst.ReinterpretCast<bfloat16_t>(), src, len); break;
    case DType::kInt32: Cast(dst.ReinterpretCast<std::int32_t>(), src, RoundMode::CAST_TRUNC, len); break;
    case DType::kInt8:  // truncated in fp16 (exact below 2048), then converted
      Cast(w.stage, src, RoundMode::CAST_TRUNC, len);
      Cast(dst.ReinterpretCast<std::int8_t>(), w.stage, RoundMode::CAST_TRUNC, len);
      break;
    default: Adds(dst.ReinterpretCast<float>(), src, 0.0f, len); break;
  }
}

// Bytes of one input's (or the output's) piece of a tile buffer: whole 32 B blocks.
std::uint64_t piece_bytes(std::uint64_t tile, DType t) {
  return ceil_to(tile * hw::isa::dtype_bytes(t), 32);
}

void ew_kernel(const EwArgs& g) {
  const std::uint64_t first = GetBlockIdx() * g.per_block;
  if (first >= g.n) return;
  const EwProgram& p = *g.prog;
  const std::uint64_t count = std::min(g.per_block, g.n - first), tile = g.tile;
  const std::size_t k = p.inputs;
  TPipe pipe;
  // One double-buffered VECIN queue holds every input's tile (k pieces per buffer), so the queue count, and with
  // it the event ids, do not grow with the inputs.
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  std::vector<std::uint64_t> at_byte(k + 1, 0);
  for (std::size_t i = 0; i < k; ++i) at_byte[i + 1] = at_byte[i] + piece_bytes(tile, g.in_type[i]);
  pipe.InitBuffer(qin, 2, at_byte[k]);
  pipe.InitBuffer(qout, 2, piece_bytes(tile, g.out_type));
  std::size_t fp32_inputs = 0;
  bool int8 = g.out_type == DType::kInt8;
  for (const DType t : g.in_type) {
    fp32_inputs += t == DType::kFp32;
    int8 = int8 || t == DType::kInt8;
  }
  const std::uint64_t regs = static_cast<std::uint64_t>(p.registers) - fp32_inputs;
  TBuf<TPosition::VECCALC> fregs, fscratch, fbits, fzero, fone, fstage;
  const std::uint64_t rt = ceil_to(tile, 256);  // register elements (Compare/Select work on 256-element blocks)
  if (regs) pipe.InitBuffer(fregs, regs * rt * 4);
  const std::uint64_t scratch = p.three_scratch ? 3 : p.needs_scratch ? 2 : 0;
  if (scratch) pipe.InitBuffer(fscratch, scratch * rt * 4);
  EwBuffers w;
  if (p.needs_mask) {
    pipe.InitBuffer(fbits, rt / 8);
    pipe.InitBuffer(fzero, rt * 4);
    w.bits = fbits.Get<std::uint8_t>();
    w.zero = fzero.Get<float>();
    Duplicate(w.zero, 0.0f, rt);
  }
  if (p.needs_one) {
    pipe.InitBuffer(fone, rt * 4);
    w.one = fone.Get<float>();
    Duplicate(w.one, 1.0f, rt);
  }
  if (int8) {
    pipe.InitBuffer(fstage, rt * 2);
    w.stage = fstage.Get<half>();
  }
  if (scratch) {
    w.scratch_a = fscratch.Get<float>();
    w.scratch_b = fscratch.Get<float>()[rt];
    w.scratch_c = scratch == 3 ? fscratch.Get<float>()[2 * rt] : w.scratch_a;
  }
  std::vector<LocalTensor<float>> r(static_cast<std::size_t>(p.registers));
  for (std::size_t i = 0, slot = 0; i < r.size(); ++i) {
    if (i < k && g.in_type[i] == DType::kFp32) continue;  // set per tile: the input's piece
    r[i] = fregs.Get<float>()[slot++ * rt];
  }
  for (std::uint64_t off = 0; off < count;) {
    const std::uint64_t at = first + off;
    std::uint64_t len = std::min(tile, count - off);
    for (std::size_t i = 0; i < k; ++i) len = std::min(len, g.period[i] - at % g.period[i]);  // no tile crosses a repetition
    LocalTensor<std::uint8_t> in = qin.AllocTensor<std::uint8_t>();
    for (std::size_t i = 0; i < k; ++i) {
      const std::uint64_t es = hw::isa::dtype_bytes(g.in_type[i]), src = g.in[i] + (at % g.period[i]) * es;
      switch (g.in_type[i]) {
        case DType::kFp32:
        case DType::kInt32: copy_in(in[at_byte[i]].ReinterpretCast<float>(), src, len); break;
        case DType::kInt8: copy_in(in[at_byte[i]], src, len); break;
        default: copy_in(in[at_byte[i]].ReinterpretCast<half>(), src, len); break;
      }
    }
    qin.EnQue(in);
    in = qin.DeQue<std::uint8_t>();
    for (std::size_t i = 0; i < k; ++i) {
      if (g.in_type[i] == DType::kFp32)
        r[i] = in[at_byte[i]].ReinterpretCast<float>();
      else
        widen_input(r[i], in[at_byte[i]], g.in_type[i], w, len);
    }
    if (fp32_inputs == 0) qin.FreeTensor(in);
    run_program(p, r, w, len);
    LocalTensor<std::uint8_t> out = qout.AllocTensor<std::uint8_t>();
    narrow_output(out, r[static_cast<std::size_t>(p.result)], g.out_type, w, len);
    if (fp32_inputs) qin.FreeTensor(in);  // fp32 inputs are registers themselves: free once the result is out
    qout.EnQue(out);
    out = qout.DeQue<std::uint8_t>();
    const std::uint64_t es = hw::isa::dtype_bytes(g.out_type), dst = g.out + at * es;
    switch (g.out_type) {
      case DType::kFp32:
      case DType::kInt32: copy_out(dst, out.ReinterpretCast<float>(), len); break;
      case DType::kInt8: copy_out(dst, out, len); break;
      default: copy_out(dst, out.ReinterpretCast<half>(), len); break;
    }
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
    case Fn::kFloor: return std::floor(arg(0));
    case Fn::kWhere: return arg(0) != 0 ? arg(1) : arg(2);
    case Fn::kEq: return arg(0) == arg(1);
    case Fn::kNe: return arg(0) != arg(1);
    case Fn::kLt: return arg(0) < arg(1);
    case Fn::kLe: return arg(0) <= arg(1);
    case Fn::kGt: return arg(0) > arg(1);
    case Fn::kGe: return arg(0) >= arg(1);
    case Fn::kIsNan: return std::isnan(arg(0));
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
  if (const auto to = p.find("to"); to != p.end()) c.to = parse_dtype(to->second, true);
  parse_expr(c);  // a syntax error is named before anything runs
  return c;
}

// The output's element type: the call's, else the first float input's, else input 0's.
DType output_type(const FusedElementwiseCall& c, const std::vector<TensorDesc>& in) {
  if (c.to) return *c.to;
  for (const TensorDesc& t : in)
    if (hw::isa::is_float(t.dtype)) return t.dtype;
  return in.at(0).dtype;
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
  d.params = {{"expr", kRequired}, {"shape", kRequired}, {"to", "(the first float input's dtype)"}};
  d.takes_integers = true;
  for (int i = 0; i < static_cast<int>(kMaxInputs); ++i) {
    d.params.push_back({"shape_x" + std::to_string(i), "shape"});
    d.params.push_back({"dtype_x" + std::to_string(i), "(--dtype)"});
  }
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  // Input k has the output's shape, or -p shape_xK.
  d.inputs = [](const Params& p, DType t) {
    const FusedElementwiseCall call = parse_call(p);
    std::vector<TensorDesc> in;
    for (std::size_t i = 0; i < parse_expr(call).inputs; ++i) {
      const auto s = p.find("shape_x" + std::to_string(i));
      const auto dt = p.find("dtype_x" + std::to_string(i));
      in.push_back(
          {s == p.end() ? call.shape : parse_shape(s->second), dt == p.end() ? t : parse_dtype(dt->second, true)});
    }
    return in;
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const FusedElementwiseCall& fc = call_as<FusedElementwiseCall>(call, "fused_elementwise");
    const Parsed c = parse_expr(fc);
    if (in.size() != c.inputs)
      throw InputError("fused_elementwise: expr reads " + std::to_string(c.inputs) + " inputs, " +
                       std::to_string(in.size()) + " given");
    EwArgs a;
    a.n = elements(fc.shape);
    a.out_type = output_type(fc, in);
    for (std::size_t i = 0; i < in.size(); ++i) {
      a.in_type.push_back(in[i].dtype);
      a.period.push_back(period_of(in[i].shape, fc.shape, i));
    }
    auto prog = std::make_shared<EwProgram>(Compiler(c.inputs).run(c.expr));
    // UB per tile element: two buffers of every input and of the output in their types, the fp32 registers (less
    // the fp32 inputs, which are registers) and scratch, the compare bits with the zero and one registers, the
    // fp16 staging row of int8.
    std::uint64_t io_bytes = hw::isa::dtype_bytes(a.out_type), fp32_inputs = 0;
    bool int8 = a.out_type == DType::kInt8;
    for (const DType t : a.in_type) {
      io_bytes += hw::isa::dtype_bytes(t);
      fp32_inputs += t == DType::kFp32;
      int8 = int8 || t == DType::kInt8;
    }
    const std::uint64_t regs = static_cast<std::uint64_t>(prog->registers) - fp32_inputs;
    const std::uint64_t scratch = prog->three_scratch ? 3 : prog->needs_scratch ? 2 : 0;
    const double per_elem = static_cast<double>(2 * io_bytes + 4 * (regs + scratch)) +
                            (prog->needs_mask ? 4.0 + 1.0 / 8 : 0.0) + (prog->needs_one ? 4.0 : 0.0) +
                            (int8 ? 2.0 : 0.0);
    std::uint64_t tile = static_cast<std::uint64_t>(static_cast<double>(chip.buffers.ub.size - 1024) / per_elem);
    tile = std::min<std::uint64_t>(tile / 256 * 256, 63 * 256);
    if (tile == 0) throw InputError("fused_elementwise: the expression needs more UB than chip " + chip.name + " has");
    a.per_block = ceil_div(ceil_div(a.n, 32), chip.vector_units()) * 32;
    a.tile = std::min(tile, ceil_to(a.per_block, 256));
    a.prog = prog;
    OpPlan plan;
    plan.outputs = {{fc.shape, a.out_type}};
    plan.type = KernelType::kVector;
    plan.block_dim = u32(ceil_div(a.n, a.per_block));
    plan.tiling = {{"tile_elements", static_cast<double>(a.tile)}, {"per_block", static_cast<double>(a.per_block)},
                   {"registers", static_cast<double>(prog->registers)}, {"instructions", static_cast<double>(prog->code.size())}};
    plan.kernel = [a](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      EwArgs g = a;
      g.in.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(g.period.size()));
      g.out = buf[g.period.size()];
      return [g] { ew_kernel(g); };
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const FusedElementwiseCall& fc = call_as<FusedElementwiseCall>(call, "fused_elementwise");
    const Parsed c = parse_expr(fc);
    const std::uint64_t n = elements(fc.shape);
    const bool integer = !hw::isa::is_float(output_type(fc, in));
    HostTensor out(n);
    std::vector<double> x(c.inputs);
    for (std::uint64_t e = 0; e < n; ++e) {
      for (std::size_t i = 0; i < c.inputs; ++i) x[i] = v[i][e % v[i].size()];
      const double y = eval(*c.expr, x);
      out[e] = static_cast<float>(integer ? std::trunc(y) : y);
    }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> fused_ops() { return {fused_elementwise_op()}; }

}  // namespace npusim::stack::ops
