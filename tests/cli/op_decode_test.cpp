// The decoding ops: `npusim op paged_attention` (a few query rows against a paged K/V cache, grouped heads packed,
// keys split over the cores and combined) and `npusim op reshape_and_cache` (new keys and values into the cache in
// place), against their CPU references (softmax in double from the same fp16/bf16 inputs, the block table and slots
// read on the host) on split (tiny, 910b) and coupled (910, 310p) chips; the two things split keys and packing are
// for (all cores busy at batch 1, each key/value head read once), and the errors of bad calls.
#include <gtest/gtest.h>

#include <random>

#include "cli/cli_support.hpp"

namespace {

using npusim_test::op_json;

TEST(OpDecode, PagedAttentionMatchesTheReferenceOnSplitAndCoupledChips) {
  std::mt19937 rng(11);
  const int dims[] = {32, 64, 128, 256};
  for (const char* config : {"tiny", "910b", "910", "310p"}) {
    const bool split = std::string(config) == "tiny" || std::string(config) == "910b";
    for (int i = 0; i < 5; ++i) {
      const int kvn = 1 + static_cast<int>(rng() % 3), group = 1 + static_cast<int>(rng() % 6);
      const int B = 1 + static_cast<int>(rng() % 3), page = 16 << (rng() % 4);
      const int S = split && i % 2 ? 2 + static_cast<int>(rng() % 6) : 1;
      std::string lens;
      for (int b = 0; b < B; ++b) lens += (b ? "," : "") + std::to_string(S + static_cast<int>(rng() % 700));
      const int D = std::string(config) == "tiny" ? 64 : dims[rng() % 4];
      const std::string args = "paged_attention --check --config " + std::string(config) +
                               " -p B=" + std::to_string(B) + " -p N=" + std::to_string(kvn * group) +
                               " -p KVN=" + std::to_string(kvn) + " -p S=" + std::to_string(S) +
                               " -p D=" + std::to_string(D) + " -p kv_len=" + lens +
                               " -p page=" + std::to_string(page) + (i == 4 ? " --dtype bf16" : "");
      const auto j = op_json(args);
      EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
    }
  }
}

// Split keys given explicitly, including more splits than a short sequence has key blocks (its last splits are
// empty and the combine skips them), and a cache with more pages than the sequences use.
TEST(OpDecode, EverySplitCountGivesTheSameAnswer) {
  for (const char* splits : {"1", "2", "5", "24"}) {
    const std::string args = std::string("paged_attention --check -p B=2 -p N=8 -p KVN=2 -p D=128 -p kv_len=1500,90 ") +
                             "-p page=64 -p pages=60 -p splits=" + splits;
    const auto j = op_json(args);
    EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
    EXPECT_EQ(j["op"]["tiling"]["splits"].get<double>(), std::stod(splits)) << args;
  }
}

// At batch 1 a LLaMA-style layer has B x KVN = 8 key/value heads for 24 cube cores: unsplit, 16 cores idle. The
// tiling splits each head's 4096 keys three ways (24 units), which must make the kernel faster than one unit per
// head; the kernel stays bound by reading K and V (16 MiB), so not 3x: at least 1.25x.
TEST(OpDecode, SplitKeysKeepEveryCoreBusyAtBatchOne) {
  const std::string shape = "paged_attention -p B=1 -p N=32 -p KVN=8 -p D=128 -p kv_len=4096";
  const auto split = op_json(shape);
  const auto whole = op_json(shape + " -p splits=1");
  EXPECT_EQ(split["op"]["tiling"]["splits"].get<double>(), 3.0);
  EXPECT_EQ(split["op"]["block_dim"].get<int>(), 24);
  EXPECT_EQ(whole["op"]["block_dim"].get<int>(), 8);
  EXPECT_LT(split["kernel"]["time_us"].get<double>() * 1.25, whole["kernel"]["time_us"].get<double>());
  // One key/value head for 32 query heads (multi-query): 32 rows a unit, more than the 16 of the fractal each core
  // would otherwise get; the blocks stay tall enough for the head to split.
  const auto mqa = op_json("paged_attention --check -p B=1 -p N=32 -p KVN=1 -p D=128 -p kv_len=4096");
  EXPECT_GT(mqa["op"]["tiling"]["splits"].get<double>(), 1.0);
  EXPECT_TRUE(mqa["check"]["passed"].get<bool>()) << mqa["check"];
}

// A block table with more entries per row than the sequences use yet (a runner's, sized for their final length):
// row b starts at b x table_cols.
TEST(OpDecode, BlockTableRowsMayBeLongerThanTheKeysNeed) {
  for (const char* config : {"910b", "910"}) {
    const std::string args = std::string("paged_attention --check --config ") + config +
                             " -p B=3 -p N=8 -p KVN=2 -p D=64 -p kv_len=100,300,17 -p page=16 -p table_cols=40";
    const auto j = op_json(args);
    EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
    EXPECT_EQ(j["op"]["inputs"][3].get<std::string>(), "3x40");
  }
}

// Grouped heads packed: the G = 4 query heads sharing a key/value head are one unit's rows, so the cores read each
// K and V row once (2 x 4096 x 8 x 128 x 2 B = 16 MiB), not once per query head (4x that). What else they read is
// the query, the block table and the workspace round trips of scores and P V, a few percent.
TEST(OpDecode, GroupedHeadsReadEachKeyAndValueRowOnce) {
  const double kv_bytes = 2.0 * 4096 * 8 * 128 * 2;
  for (const char* splits : {"1", "3"}) {
    const auto j =
        op_json(std::string("paged_attention -p B=1 -p N=32 -p KVN=8 -p D=128 -p kv_len=4096 -p splits=") + splits);
    const double read = j["memory"]["gm_read_bytes"].get<double>();
    EXPECT_GE(read, kv_bytes) << splits;
    EXPECT_LT(read, 1.15 * kv_bytes) << splits;
  }
}

TEST(OpDecode, ReshapeAndCacheWritesTheNewRowsAndKeepsTheOthers) {
  for (const char* args : {"-p T=37 -p KVN=4 -p D=64 -p page=16 -p pages=8", "-p T=7 -p KVN=8 -p D=128 -p pages=64",
                           "-p T=300 -p KVN=2 -p D=80 -p page=32 -p pages=40 --dtype fp32",
                           "-p T=3 -p KVN=1 -p D=16 -p page=16 -p pages=1 --dtype bf16 --config 910"}) {
    const auto j = op_json(std::string("reshape_and_cache --check ") + args);
    EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
    EXPECT_EQ(j["op"]["outputs"].size(), 2u);
  }
}

TEST(OpDecode, BadCallsAreNamed) {
  const std::string pa = "op paged_attention -p B=2 -p N=8 -p D=64 ";
  npusim_test::expect_input_errors({
      {pa + "-p kv_len=100,20,30", "kv_len"},
      {pa + "-p kv_len=10 -p S=11", "fewer than its S=11 new rows"},
      {pa + "-p kv_len=100 -p page=24", "page=24 must be a multiple of 16"},
      {pa + "-p kv_len=100 -p KVN=3", "cannot be grouped over KVN=3"},
      {pa + "-p kv_len=1000 -p pages=3", "pages=3 cannot hold the 8 pages"},
      {pa + "-p kv_len=1000 -p table_cols=7", "table_cols=7 block table entries cannot list the 8 pages"},
      {"op paged_attention -p B=2 -p kv_len=10 -p S=2 -p N=512 -p KVN=512 -p D=256",
       "elements per query row is more than 65535"},
      {pa + "-p kv_len=10 -p N=512", "-p N is given twice ('8' and '512')"},
      {pa + "-p kv_len=100 -p splits=2 --config 910", "splits=2 needs a split chip"},
      {pa + "-p kv_len=100 -p S=2 --config 310p", "need a split chip"},
      {"op paged_attention -p B=1 -p N=8 -p D=64", "parameter 'kv_len'"},
      {"op reshape_and_cache -p T=4 -p KVN=1 -p D=16", "parameter 'pages'"},
      {"op reshape_and_cache -p T=400 -p KVN=1 -p D=16 -p page=16 -p pages=20 --check", "400 distinct values"},
  });
}

}  // namespace
