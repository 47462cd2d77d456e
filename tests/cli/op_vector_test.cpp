// `npusim op` vector ops (Softmax, LogSoftmax, LayerNorm, RMSNorm, SwiGLU, RoPE in both forms, GELU in both
// forms, SiLU, Cast, ReduceSum/Mean/Max, Transpose/Permute) against their CPU references (fp32 or double from the
// same inputs; tolerances per dtype in cli/op_command.cpp, plus the accumulation bound a sum states) on split (tiny,
// 910b) and coupled (910) chips, sizes that are not multiples of the tiles; tiles that follow the UB; rows too long
// for the UB in chunks, with their exact GM traffic; LayerNorm bound by the memory on a large tensor; clear errors.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "cli/cli_support.hpp"

namespace {

using npusim_test::op_json;

std::string random_shape(std::mt19937& rng, int dims, int max_last) {
  std::string s;
  for (int i = 0; i < dims; ++i) {
    const int v = i + 1 == dims ? 1 + static_cast<int>(rng() % max_last) : 1 + static_cast<int>(rng() % 9);
    s += (i ? "x" : "") + std::to_string(v);
  }
  return s;
}

// Rows must fit the UB: tiny (32 KiB of UB) gets rows up to 300 elements.
void check_op(const std::string& op, const std::string& extra, int max_last, bool even_last = false, int min_dims = 1) {
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(op)));
  const char* dtypes[] = {"fp16", "bf16", "fp32"};
  for (const char* config : {"tiny", "910b", "910"}) {
    for (int i = 0; i < 3; ++i) {
      const int last = std::string(config) == "tiny" ? std::min(max_last, 300) : max_last;
      std::string shape = random_shape(rng, min_dims + static_cast<int>(rng() % (4 - min_dims)), last);
      if (even_last) {  // the last dim doubled
        const auto x = shape.find_last_of('x');
        const std::string last = x == std::string::npos ? shape : shape.substr(x + 1);
        shape = (x == std::string::npos ? "" : shape.substr(0, x + 1)) + std::to_string(2 * std::stoi(last));
      }
      std::string args = op;
      args.append(" --check --config ").append(config).append(" -p shape=").append(shape);
      args.append(" --dtype ").append(dtypes[i]).append(extra);
      const auto j = op_json(args);
      EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
    }
  }
}

TEST(OpVector, SoftmaxNormsAndGatesMatchTheReference) {
  check_op("softmax", "", 1500);
  check_op("log_softmax", "", 1500);
  check_op("layernorm", " -p eps=1e-5", 1500);
  check_op("rmsnorm", " -p eps=1e-6", 1500);
  check_op("swiglu", "", 700, true);
}

// The text report prints the check's largest error to three significant digits, the value --json gives (issue 24:
// a fixed format printed 1.2e-4 as "0.000").
TEST(OpVector, TheTextReportPrintsTheCheckErrorInSignificantDigits) {
  const std::string call = "op softmax -p shape=64x1024 --check";
  const npusim_test::Result text = npusim_test::run(call);
  ASSERT_EQ(text.status, 0) << text.err;
  const double want = npusim_test::op_json("softmax -p shape=64x1024 --check")["check"]["max_abs_err"].get<double>();
  ASSERT_GT(want, 0);
  const std::string key = "max abs err ";
  const auto at = text.out.find(key);
  ASSERT_NE(at, std::string::npos) << text.out;
  const double shown = std::stod(text.out.substr(at + key.size()));
  EXPECT_NEAR(shown, want, want * 0.005) << text.out;
}

TEST(OpVector, RopeInBothFormsMatchesTheReference) {
  check_op("rope", "", 128, true, 2);
  check_op("rope_interleaved", "", 128, true, 2);
}

TEST(OpVector, ActivationsAndCastMatchTheReference) {
  check_op("gelu", "", 3000);
  check_op("gelu_tanh", "", 3000);
  check_op("silu", "", 3000);
  for (const char* op : {"relu", "exp", "log", "sqrt", "abs", "neg", "reciprocal", "sigmoid", "tanh", "erf"}) check_op(op, "", 3000);
  for (const char* to : {"fp16", "bf16", "fp32"}) check_op("cast", std::string(" -p to=") + to, 3000);
}

TEST(OpVector, ReductionsAlongEveryAxisMatchTheReference) {
  for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    for (const char* axis : {"0", "1", "-1"}) {
      for (const char* config : {"tiny", "910b"}) {
        const std::string args = std::string(op) + " --check -p shape=37x300x5 -p axis=" + axis + " --config " + config;
        const auto j = op_json(args);
        EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
      }
    }
  }
  const auto j = op_json("reduce_sum --check -p shape=300x70 -p axis=0 --dtype fp32");
  EXPECT_TRUE(j["check"]["passed"].get<bool>()) << j["check"];
}

TEST(OpVector, TransposeAndPermuteMatchTheReference) {
  struct Case {
    std::string shape, perm;
  };
  const Case cases[] = {{"64x128", ""}, {"100x37", ""}, {"3x300x70", "0,2,1"}, {"2x5x7x9", "0,2,1,3"}, {"4x3x2x33", "2,1,0,3"}};
  for (const Case& c : cases) {
    for (const char* dtype : {"fp16", "fp32"}) {
      for (const char* config : {"tiny", "910"}) {
        std::string args = "transpose --check -p shape=" + c.shape + " --dtype " + dtype + " --config " + config;
        if (!c.perm.empty()) args += " -p perm=" + c.perm;
        const auto j = op_json(args);
        EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
      }
    }
  }
}

TEST(OpVector, RowTilesFollowTheUb) {
  for (const char* op : {"softmax", "layernorm"}) {
    const std::string shape = std::string(op) + " --check -p shape=512x1024";
    const auto full = op_json(shape);
    const auto half = op_json(shape + " --set buffers.ub.size=96KiB --set buffers.ub.bank_groups=8");
    EXPECT_TRUE(full["check"]["passed"].get<bool>());
    EXPECT_TRUE(half["check"]["passed"].get<bool>());
    EXPECT_LT(half["op"]["tiling"]["rows_per_tile"].get<double>(), full["op"]["tiling"]["rows_per_tile"].get<double>()) << op;
  }
}

// Rows longer than the UB holds stream through in chunks (long_row_kernel): automatically on tiny (32 KiB of UB) at
// 3001 columns and on 910b at 30000, or with -p chunk=N on short rows (many chunks and a tail). Every dtype, the
// LayerNorm statistics and the AddLayerNorm sum, against the same references as the short path.
TEST(OpVector, LongRowsStreamInChunksAndMatchTheReference) {
  const char* ops[] = {"softmax", "log_softmax", "layernorm -p stats=1", "add_layernorm", "add_layernorm -p sum=0", "rmsnorm"};
  const char* dtypes[] = {"fp16", "bf16", "fp32"};
  int i = 0;
  for (const char* op : ops) {
    for (const std::string shape : {"--config tiny -p shape=3x3001", "-p shape=2x30000", "--config 910 -p shape=3x1000 -p chunk=128"}) {
      const std::string args = std::string(op) + " --check " + shape + " --dtype " + dtypes[i++ % 3];
      const auto j = op_json(args);
      EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
      EXPECT_TRUE(j["op"]["tiling"].contains("chunk")) << args;
    }
  }
}

// The chunked path's GM traffic, from its algorithm: pass 1 reads each row, pass 2 reads it again with gamma (and
// beta) for each row and writes the output once; a row of one chunk is read once. Byte counts are exact.
TEST(OpVector, LongRowsReadTheirInputTwiceUnlessOneChunkHoldsThem) {
  struct Case {
    std::string args;
    double reads, writes;
  };
  const double rows = 5;
  const Case cases[] = {
      // softmax fp16, 30000 columns: chunks of 12160, two reads
      {"softmax -p shape=5x30000", 2 * rows * 30000 * 2, rows * 30000 * 2},
      // rmsnorm fp16, 8192 columns in one chunk: x once, gamma once per row
      {"rmsnorm -p shape=5x8192", rows * 8192 * 2 + rows * 8192 * 2, rows * 8192 * 2},
      // layernorm fp32, 8192 columns in chunks of 4864: x twice, gamma and beta per row
      {"layernorm -p shape=5x8192 --dtype fp32", 2 * rows * 8192 * 4 + rows * 2 * 8192 * 4, rows * 8192 * 4},
      // add_layernorm fp16 with the sum written: x and the residual twice, gamma and beta, the output and the sum
      {"add_layernorm -p shape=5x8192", 4 * rows * 8192 * 2 + rows * 2 * 8192 * 2, 2 * rows * 8192 * 2},
  };
  for (const Case& c : cases) {
    const auto j = op_json(c.args);
    EXPECT_EQ(j["memory"]["gm_read_bytes"].get<double>(), c.reads) << c.args << " " << j["op"]["tiling"];
    EXPECT_EQ(j["memory"]["gm_write_bytes"].get<double>(), c.writes) << c.args;
  }
}

// A 256 MiB LayerNorm (fp16 in and out, more than the 192 MiB L2): the HBM runs at most of its peak while the
// Vector unit waits for data part of the time.
TEST(OpVector, LayerNormOnALargeTensorIsBoundByTheMemory) {
  const auto j = op_json("layernorm -p shape=32768x4096");
  EXPECT_GT(j["memory"]["hbm_utilization"].get<double>(), 0.6) << j["memory"];
  EXPECT_LT(j["kernel"]["pipes"]["vector"].get<double>(), 0.85) << j["kernel"]["pipes"];
}

// UB bank conflicts are on by default (docs/hw.md); the row kernels lay their buffers out so that none of their
// instructions reads or writes a bank group or bank more than the datapath's pace allows: the same cycles with the
// conflicts modelled as without, on 910b and 910.
TEST(OpVector, RowKernelsAreLaidOutFreeOfUbBankConflicts) {
  for (const char* op : {"softmax", "log_softmax", "layernorm", "rmsnorm", "add_layernorm", "swiglu"}) {
    for (const char* config : {"910b", "910"}) {
      const std::string args = std::string(op) + " -p shape=64x4096 --config " + config;
      const auto on = op_json(args), off = op_json(args + " --set vector.bank_conflicts=false");
      EXPECT_EQ(on["kernel"]["cycles"], off["kernel"]["cycles"]) << args;
    }
  }
}

TEST(OpVector, BadCallsAreClearErrors) {
  npusim_test::expect_input_errors({
      {"op swiglu -p shape=4x200000", "swiglu: a row of 200000 elements does not fit the UB of chip 910b"},
      {"op layernorm -p shape=4x200 -p chunk=100", "layernorm: chunk=100 is not a multiple of 64"},
      {"op add_layernorm -p shape=4x8192 -p chunk=16320 --dtype fp32", "add_layernorm: chunk=16320 needs"},
      {"op softmax -p shape=4x200 -p chunk=20000", "chunk='20000' is not an integer in 0..16320"},
      {"op swiglu -p shape=4x7", "swiglu: the last dimension (7) must be even"},
      {"op rope -p shape=64", "rope: shape 64 needs at least two dims"},
      {"op layernorm -p shape=4x8 -p eps=-1", "parameter eps='-1' is not a non-negative number"},
      {"op cast -p shape=4", "cast: parameter 'to' is required"},
      {"op cast -p shape=4 -p to=int8", "cast: parameter to='int8' is not one of fp16, bf16, fp32"},
      {"op reduce_sum -p shape=4x8 -p axis=2", "reduce_sum: axis='2' is not an axis of shape 4x8"},
      {"op transpose -p shape=4x8x2 -p perm=0,1", "perm='0,1' is not a permutation of the 3 dims"},
      {"op transpose -p shape=4x8x2 -p perm=2,0,1", "moves the last dim elsewhere than the one before it"},
  });
}

}  // namespace
