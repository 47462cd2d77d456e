// `npusim op` for what masks and indices need (issue 20 item 2): fused_elementwise's comparisons, logic and isnan,
// inputs of mixed element types (int32, int8 bools) and integer outputs, against the CPU reference (exact for 0/1
// and integer results); gather against its reference on split and coupled chips, its GM traffic against the formula
// (the indices, the rows picked, the output), and its errors.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_support.hpp"

namespace {

using npusim_test::op_json;

void expect_passes(const std::string& args) {
  const auto j = op_json(args + " --check");
  EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
}

// Inputs of int8 values -1, 0 and 1 (random values in [-1, 1) rounded) make ties, zeros and both truth values
// frequent, so every function's both outcomes are checked; float inputs check the float compare. (isnan with real
// NaNs: index_models_test.py's unfused attention guard.)
TEST(OpIndex, ComparisonsLogicAndIsnanMatchTheReference) {
  for (const char* config : {"tiny", "910"}) {
    for (const char* types : {" -p dtype_x0=int8 -p dtype_x1=int8 -p to=fp16", " --dtype fp32"}) {
      const std::string c = std::string(" --config ") + config + " -p shape=3x333" + types;
      for (const char* e :
           {"eq(x0,x1)", "ne(x0,0)", "lt(x0,x1)", "le(x0,0.25)", "gt(x0,x1)", "ge(x1,x0)", "isnan(x0)",
            "and(gt(x0,0),lt(x1,0))", "or(x0,x1)", "xor(gt(x0,0),gt(x1,0))", "not(gt(x0,x1))", "and(x0,x1)"}) {
        expect_passes(std::string("fused_elementwise -p expr='") + e + "'" + c);
      }
    }
  }
}

// A padding mask from an int8 bool and an int32 input, the output fp16 (-inf where masked); an fp32 comparison
// written as bool; a float expression truncated into int32 (toward zero, as ONNX's Cast).
TEST(OpIndex, MixedInputTypesAndIntegerOutputsMatchTheReference) {
  expect_passes(
      "fused_elementwise -p expr='where(and(x0,ne(x1,0)),0,-inf)' -p dtype_x0=bool -p dtype_x1=int32 "
      "-p to=fp16 -p shape=4x300");
  expect_passes("fused_elementwise -p expr='add(x0,x1)' -p dtype_x1=int32 -p shape=2x700 --dtype bf16");
  expect_passes("fused_elementwise -p expr='gt(x0,x1)' -p to=bool -p shape=4x300 --dtype fp32");
  expect_passes("fused_elementwise -p expr='mul(x0,3.7)' -p to=int32 -p shape=1000 --dtype fp32");
  expect_passes("fused_elementwise -p expr='mul(x0,-5.5)' -p to=int8 -p shape=1000 --dtype fp16");
  const auto j = op_json("fused_elementwise -p expr='lt(x0,x1)' -p to=bool -p shape=64 --dtype fp16");
  EXPECT_EQ(j["op"]["outputs"][0]["dtype"], "int8");
}

// floor (a cast to int32 toward -inf and back) of values with fractions of both signs, into fp32 and int32; a nan
// literal selected (a NaN matches a NaN in the check). The ONNX node tests of Pow run floor on exponents.
TEST(OpIndex, FloorAndNanMatchTheReference) {
  for (const char* config : {"tiny", "910b"}) {
    const std::string c = std::string(" -p shape=3x333 --config ") + config;
    expect_passes("fused_elementwise -p expr='floor(mul(x0,7.3))' --dtype fp32" + c);
    expect_passes("fused_elementwise -p expr='floor(mul(x0,100))' -p to=int32 --dtype fp16" + c);
    expect_passes("fused_elementwise -p expr='where(gt(x0,0),nan,floor(x0))' --dtype fp32" + c);
  }
  const auto j = op_json("fused_elementwise -p expr='floor(x0)' -p shape=4096 --dtype fp32 --check");
  EXPECT_EQ(j["check"]["max_abs_err"].get<double>(), 0.0) << "floor is exact";
}

TEST(OpIndex, GatherMatchesTheReference) {
  for (const char* config : {"tiny", "910b", "910"}) {
    // Small rows and many indices: tiles of 256 rows (their indices in the UB the stages leave).
    for (const char* call :
         {"-p shape=100x64 -p indices=2x16", "-p shape=1000x4096 -p indices=7", "-p shape=10x3 -p indices=40",
          "-p shape=50x8x16 -p indices=3x5", "-p shape=100x16 -p indices=20000"}) {
      for (const char* dtype : {"fp16", "fp32"})
        expect_passes(std::string("gather ") + call + " --dtype " + dtype + " --config " + config);
    }
  }
}

// Each index's row is one MTE2 copy (row bytes), the indices one copy per tile (4 B each), the output one MTE3 copy
// per tile: GM reads = n * (4 + H * size), writes = n * H * size; op.bytes is that traffic, not the whole table. A
// row longer than a stage (half of 910b's 192 KiB UB: 48896 fp16 elements) goes in pieces, each reading its index
// again: 100000 elements are 3 pieces.
TEST(OpIndex, GatherMovesTheRowsItPicksAndNothingElse) {
  struct Case {
    std::string args;
    double n, h, size, pieces;
  };
  for (const Case& c : {Case{"gather -p shape=30000x1024 -p indices=1x64", 64, 1024, 2, 1},
                        Case{"gather -p shape=512x96 -p indices=300 --dtype fp32", 300, 96, 4, 1},
                        Case{"gather -p shape=64x100000 -p indices=3", 3, 100000, 2, 3}}) {
    const auto j = op_json(c.args);
    EXPECT_EQ(j["op"]["tiling"]["row_pieces"].get<double>(), c.pieces) << c.args;
    EXPECT_EQ(j["memory"]["gm_read_bytes"].get<double>(), c.n * (4 * c.pieces + c.h * c.size)) << c.args;
    EXPECT_EQ(j["memory"]["gm_write_bytes"].get<double>(), c.n * c.h * c.size) << c.args;
    EXPECT_EQ(j["op"]["bytes"].get<double>(), c.n * (4 + 2 * c.h * c.size)) << c.args;
  }
}

TEST(OpIndex, BadCallsAreClearErrors) {
  npusim_test::expect_input_errors({
      {"op gather -p shape=100x64", "gather: parameter 'indices' (the indices' shape, e.g. 2x16) is required"},
      {"op fused_elementwise -p expr='eq(x0)' -p shape=4", "eq takes 2 arguments"},
      {"op fused_elementwise -p expr='x0' -p shape=4 -p to=int64",
       "dtype 'int64' is not one of fp16, bf16, fp32, int32, int8, bool"},
      {"op fused_elementwise -p expr='x0' -p shape=4 -p dtype_x0=uint4", "dtype 'uint4' is not one of"},
  });
}

}  // namespace
