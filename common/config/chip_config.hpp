// The chip config: every parameter the simulator reads, declared once in chip_config.cpp with key, unit, default
// and doc. Values are in base units (see units.hpp): bytes, Hz, B/s, bit/s, ns, cycles, B/cycle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/schema.hpp"

namespace npusim::config {

struct ClockParams {
  double core_hz = 0;         // AI cores, L2 and interconnect
  double control_cpu_hz = 0;  // task-scheduler CPU
};

struct CoreParams {
  std::string organisation;  // "split" or "coupled"
  std::uint64_t ai_cores = 0;      // coupled: cores with Cube + Vector
  std::uint64_t aic = 0;           // split: cube cores
  std::uint64_t aiv = 0;           // split: vector cores
  std::uint64_t aiv_per_aic = 0;   // split: vector cores grouped with one cube core
  std::uint64_t vector_cores = 0;  // coupled: additional vector-only cores
};

// One Cube step computes an m x k x n fractal product every `cycles` cycles.
struct FractalParams {
  std::uint64_t m = 0, k = 0, n = 0, cycles = 0;
  std::uint64_t macs() const { return m * k * n; }
};

struct CubeParams {
  FractalParams fp16, bf16, int8, fp32;
  std::uint64_t latency = 0;  // pipeline fill cycles added once per Mmad
};

struct VectorLatencies {
  std::uint64_t add = 0, sub = 0, mul = 0, div = 0, max = 0, min = 0;
  std::uint64_t adds = 0, muls = 0, maxs = 0, mins = 0;
  std::uint64_t exp = 0, ln = 0, abs = 0, sqrt = 0, rsqrt = 0, reciprocal = 0, relu = 0;
  std::uint64_t cast = 0, duplicate = 0, reduce = 0, compare = 0, select = 0, transpose = 0, gather = 0;
};

struct VectorParams {
  std::uint64_t bytes_per_repeat = 0;
  std::uint64_t block_bytes = 0;
  std::uint64_t max_repeat = 0;
  std::uint64_t cycles_per_repeat = 0;
  bool bank_conflicts = false;
  VectorLatencies latency;
};

// A copy path: cycles = setup_cycles + ceil(bytes / bytes_per_cycle).
struct PathParams {
  double bytes_per_cycle = 0;
  std::uint64_t setup_cycles = 0;
};

struct MteParams {
  PathParams gm_to_ub, gm_to_l1, ub_to_gm, l1_to_l0a, l1_to_l0b, l1_to_ub, ub_to_l1, l0c_to_ub, l1_to_bt;
};

struct ScalarParams {
  std::uint64_t cycles_per_instruction = 0;
  std::uint64_t api_call_cycles = 0;    // per kernel API call that issues pipe instructions
  std::uint64_t queue_call_cycles = 0;  // per TQue AllocTensor / EnQue / DeQue / FreeTensor
};

struct QueueParams {
  std::uint64_t s = 0, mte1 = 0, mte2 = 0, mte3 = 0, m = 0, v = 0, fix = 0;
};

struct FlagParams {
  std::uint64_t event_ids = 0;
  std::uint64_t cross_core_ids = 0;
  std::uint64_t cross_core_max_pending = 0;
  std::uint64_t cross_core_latency = 0;  // cycles from a cross-core set firing to its count arriving
};

struct BufferParams {
  std::uint64_t size = 0;
  std::uint64_t align = 0;
};

struct UbParams : BufferParams {
  std::uint64_t bank_bytes = 0;
  std::uint64_t bank_groups = 0;
  std::uint64_t banks() const { return bank_bytes ? size / bank_bytes : 0; }
};

struct BufferSet {
  BufferParams l1, l0a, l0b, l0c;
  UbParams ub;
  BufferParams bias_table, fixpipe_buffer;
};

// GM model used until the full memory system is selected: latency + bytes / per-core rate.
struct SimpleGmParams {
  std::uint64_t read_latency = 0;   // cycles
  std::uint64_t write_latency = 0;  // cycles
  double bytes_per_cycle = 0;       // per core
};

struct L2Params {
  std::uint64_t capacity = 0;
  std::uint64_t line_bytes = 0;
  std::uint64_t ways = 0;
  std::uint64_t slices = 0;
  std::uint64_t hit_latency = 0;   // cycles
  std::uint64_t miss_latency = 0;  // cycles added on a miss, before the HBM access
  double slice_bytes_per_cycle = 0;
  std::string replacement;
  std::string slice_hash;
};

struct HbmTiming {
  double tRCD = 0, tRP = 0, tRAS = 0, tRRD_S = 0, tRRD_L = 0, tFAW = 0, tWR = 0, tWTR_L = 0, tWTR_S = 0;
  double tCCD_S = 0, tCCD_L = 0, tRTP = 0, tRTRS = 0;
  double tCL = 0, tCWL = 0, tRFC = 0, tRFCpb = 0, tREFI = 0;
};

struct HbmParams {
  std::string kind;
  std::uint64_t stacks = 0;
  std::uint64_t channels_per_stack = 0;
  std::uint64_t pseudo_channels = 0;  // per channel; 1 = legacy mode
  std::uint64_t bank_groups = 0;      // per pseudo-channel
  std::uint64_t banks_per_group = 0;
  std::uint64_t row_bytes = 0;
  std::uint64_t bus_bits = 0;  // per pseudo-channel
  std::uint64_t burst_bytes = 0;
  double pin_rate = 0;  // bit/s per pin
  std::uint64_t capacity = 0;
  double controller_latency = 0;  // ns
  std::uint64_t queue_depth = 0;  // transaction queue per pseudo-channel
  std::uint64_t bank_queue_depth = 0;    // command queue per bank
  std::uint64_t write_buffer = 0;        // posted writes per pseudo-channel (0: none, writes go as they come)
  double write_high = 0, write_low = 0;  // drain watermarks, fractions of write_buffer
  std::string address_mapping;
  bool row_hash = true;
  std::string page_policy;
  std::string refresh;
  std::string scheduler;            // request order within a bank: fr_fcfs or fcfs
  std::uint64_t scheduler_cap = 0;  // FR-FCFS: younger row hits that may pass one request
  HbmTiming timing;

  std::uint64_t pseudo_channel_count() const { return stacks * channels_per_stack * pseudo_channels; }
  // Peak data rate = pseudo-channels x bus width x pin rate / 8.
  double peak_bytes_per_second() const {
    return static_cast<double>(pseudo_channel_count()) * static_cast<double>(bus_bits) * pin_rate / 8.0;
  }
};

struct NocParams {
  std::string topology;
  std::uint64_t latency = 0;  // cycles, one way, core to L2 slice
  double core_read_bytes_per_cycle = 0;
  double core_write_bytes_per_cycle = 0;
  double l2_to_hbm_bytes_per_cycle = 0;  // per pseudo-channel link
  std::uint64_t core_outstanding = 0;    // requests in flight per core and direction
  std::uint64_t request_bytes = 0;       // bytes per request: a copy of B bytes is ceil(B / request_bytes) of them
};

struct SdmaParams {
  std::uint64_t engines = 0;
  double bandwidth = 0;  // B/s per engine
  double latency = 0;    // ns
};

struct HostLinkParams {
  double bandwidth = 0;  // B/s per direction
  double latency = 0;    // ns
};

struct LaunchParams {
  double dispatch = 0;      // ns, TS to core
  double core_startup = 0;  // ns
  double kernel_init = 0;   // ns, arguments and tiling data
  double completion = 0;    // ns, core to TS to completion queue
  std::string dispatch_order;  // "fifo" or "fair" (firmware/ts/dispatch.hpp)
};

struct HostParams {
  double launch_overhead = 0;  // ns of host time per launch call
  double memcpy_overhead = 0;
  double sync_overhead = 0;
  double event_overhead = 0;
};

struct DriverParams {
  std::string completion;        // "interrupt" or "poll"
  double interrupt_latency = 0;  // ns
  double poll_interval = 0;      // ns
};

struct SimParams {
  std::uint64_t chunk_bytes = 0;
  std::string memory_model;  // "detailed" or "simple"
  double counter_interval = 0;  // ns
  bool sanitize = false;        // the synchronisation checker (--sanitize)
  std::uint64_t max_instructions = 0;  // per kernel launch, over all its blocks
  // Limits on what sizes the simulator's own memory (check_consistency refuses more, naming the key and the limit).
  std::uint64_t max_cores = 0;         // cores of all kinds; also L2 slices, SDMA engines, HBM pseudo-channels
  std::uint64_t max_queue_depth = 0;   // queue depths, requests in flight, pending flag counts, banks, L2 ways
  std::uint64_t max_l2_lines = 0;      // L2 capacity / line size
  std::uint64_t max_buffer_bytes = 0;  // each of a core's local buffers
};

struct ChipConfig {
  std::string name;
  std::string description;
  ClockParams clock;
  CoreParams cores;
  CubeParams cube;
  VectorParams vector;
  MteParams mte;
  PathParams fixpipe;
  ScalarParams scalar;
  QueueParams queues;
  FlagParams flags;
  BufferSet buffers;
  SimpleGmParams simple_gm;
  L2Params l2;
  HbmParams hbm;
  NocParams noc;
  SdmaParams sdma;
  HostLinkParams host_link;
  LaunchParams launch;
  HostParams host;
  DriverParams driver;
  SimParams sim;

  bool split() const { return cores.organisation == "split"; }
  // Cores that have a Cube: AIC on split chips, AI cores on coupled ones.
  std::uint64_t cube_cores() const { return split() ? cores.aic : cores.ai_cores; }
  // Cores that have a Vector unit: AIV on split chips, AI cores plus vector-only cores on coupled ones.
  std::uint64_t vector_units() const { return split() ? cores.aiv : cores.ai_cores + cores.vector_cores; }
  // Peak dense ops per second (2 per MAC): cube cores x fractal MACs / cycles per fractal x 2 x clock.
  double peak_ops(const FractalParams& f) const {
    return static_cast<double>(cube_cores()) * static_cast<double>(f.macs()) / static_cast<double>(f.cycles) *
           2.0 * clock.core_hz;
  }
};

// The single declaration of every key.
void reflect(Visitor& v, ChipConfig& c);

// A consistency problem found after loading, naming the key it concerns.
// hbm.address_mapping read as its fields, most significant first (hw/mem/address_map.hpp says what each means):
// ro, ba, ch, co, bg and optionally coN, each once, ro first. `error` says why a name is not such a mapping (empty
// when it is); the loader reports it at the key, the HBM model refuses it.
struct AddressFields {
  enum Field : std::uint8_t { kRow, kBank, kChannel, kColumn, kColumnLow, kBankGroup };
  std::vector<Field> msb_first;
  std::uint32_t low_columns = 1;  // N of a "coN" field; 1 when the column is not split
  std::string error;
};
AddressFields parse_address_mapping(const HbmParams& h);

// The most the simulator's own memory is sized for (check_consistency refuses more, naming the key): the defaults
// of the sim.max_* keys, which a config may raise up to the ceilings below, and fixed limits.
inline constexpr std::uint64_t kMaxCores = 4096;                                // sim.max_cores
inline constexpr std::uint64_t kMaxQueueDepth = 65536;                          // sim.max_queue_depth
inline constexpr std::uint64_t kMaxL2Lines = std::uint64_t{1} << 24;            // sim.max_l2_lines
inline constexpr std::uint64_t kMaxLocalBufferBytes = std::uint64_t{16} << 20;  // sim.max_buffer_bytes
// Ceilings of those keys: the widths the models index with (32-bit core, bank and line numbers; buffer offsets).
inline constexpr std::uint64_t kCeilingCores = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kCeilingQueueDepth = std::uint64_t{1} << 24;
inline constexpr std::uint64_t kCeilingL2Lines = std::uint64_t{1} << 31;
inline constexpr std::uint64_t kCeilingBufferBytes = std::uint64_t{1} << 31;
inline constexpr std::uint64_t kMaxFlagIds = 64;  // event ids per pipe pair, cross-core flag ids (hardware: 8-16)
inline constexpr std::uint64_t kMaxRowBytes = std::uint64_t{1} << 20;  // a DRAM row, an L2 line
inline constexpr double kMaxCounterIntervalNs = 1e9;                   // one second

struct Problem {
  std::string key;
  std::string message;
  // Other keys whose values make the problem together with `key`: the loader names whichever of them the user set
  // last (a --set over the user's file over a built-in config) as the problem's origin.
  std::vector<std::string> with = {};
};
std::vector<Problem> check_consistency(const ChipConfig& c);

// Every declared key with its metadata, in declaration order.
std::vector<KeyInfo> describe_schema();

// One key's value in a loaded config: numbers in their base unit, text as it is (booleans as 0/1).
struct ResolvedValue {
  std::string key;
  std::string type;  // as KeyInfo::type
  Unit unit = Unit::kCount;
  double number = 0;  // integer, real and boolean keys
  std::string text;   // the value exactly, in the base unit ("196608", "1.6e+12B/s", "lru"), as --set takes it
};
// Every declared key of `c`, in declaration order.
std::vector<ResolvedValue> resolved_values(const ChipConfig& c);
// A fingerprint of every resolved value (FNV-1a, 64 bits, 16 hex digits): two configs with the same hash have the
// same values for every key, however they were written (files, extends, --set, units).
std::string config_hash(const ChipConfig& c);
// A base-unit value as text the loader reads back exactly ("1.6e+12B/s", "1800000000Hz", "196608").
std::string exact_value_text(double value, Unit unit);

}  // namespace npusim::config
