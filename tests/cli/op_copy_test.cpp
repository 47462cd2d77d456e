// `npusim op` data-movement ops (Slice, Concat, Split, Expand) against their references (element by element, so
// exact) on split (tiny, 910b) and coupled (910) chips and every dtype; Expand of the innermost dim through the
// UB-filling path; clear errors.
#include <gtest/gtest.h>

#include "cli/cli_support.hpp"

namespace {

using npusim_test::op_json;

TEST(OpCopy, SliceConcatSplitAndExpandMatchTheReference) {
  const char* calls[] = {
      "slice -p shape=7x33x5 -p starts=1,2 -p ends=6,30 -p steps=2,3",
      "concat -p shapes=3x5x17,3x2x17,3x9x17 -p axis=1",
      "split -p shape=6x100 -p axis=1 -p sizes=37,50,13",
      "expand -p shape=5x1x17 -p to=2x5x3x17",     // outer dims repeat whole rows
      "expand -p shape=4x1x37x1 -p to=4x3x37x333",  // the innermost dim repeats one value (UB fill)
      "expand -p shape=1 -p to=3x5000",             // a scalar to a tensor
      "expand -p shape=2x1 -p to=2x70000",          // rows longer than a stage: pieces of a row
      "expand -p shape=512x1 -p to=512x8",          // many short rows (the values buffer stays within the UB)
  };
  const char* dtypes[] = {"fp16", "bf16", "fp32"};
  int i = 0;
  for (const char* config : {"tiny", "910b", "910"}) {
    for (const char* call : calls) {
      const std::string args = std::string(call) + " --check --config " + config + " --dtype " + dtypes[i++ % 3];
      const auto j = op_json(args);
      EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
      EXPECT_EQ(j["check"]["max_abs_err"].get<double>(), 0.0) << args;  // a copy is exact
    }
  }
}

// Repeating the innermost dim fills rows in the UB from one read of the values (op.tiling.splat_row) instead of a
// copy per element: the same 32 MiB written that way is at least as fast as repeating whole 512-element rows, which
// copy jobs move as bursts (property; element-per-burst copies were three orders of magnitude slower).
TEST(OpCopy, ExpandingTheInnermostDimIsAsFastAsExpandingRows) {
  const auto inner = op_json("expand -p shape=4x1x512x1 -p to=4x16x512x512");
  const auto rows = op_json("expand -p shape=4x1x1x512 -p to=4x16x512x512");
  EXPECT_EQ(inner["op"]["tiling"]["splat_row"].get<double>(), 512.0);
  EXPECT_FALSE(rows["op"]["tiling"].contains("splat_row"));
  EXPECT_LE(inner["kernel"]["cycles"].get<double>(), rows["kernel"]["cycles"].get<double>());
}

TEST(OpCopy, BadCallsAreClearErrors) {
  npusim_test::expect_input_errors({
      {"op expand -p shape=3x2 -p to=3x4", "expand: 3x2 does not broadcast to 3x4"},
      {"op expand -p shape=3x2", "expand: parameter 'to' is required"},
      {"op split -p shape=6x10 -p axis=1 -p sizes=3,4", "split: sizes add up to 7, dim 1 is 10"},
      {"op concat -p shapes=3x5,4x5 -p axis=1", "concat: 4x5 and 3x5 differ outside axis 1"},
      {"op slice -p shape=6x10 -p starts=4 -p ends=2", "slice: dim 0 is empty"},
  });
}

}  // namespace
