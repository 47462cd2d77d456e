#include "common/config/chip_config.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "common/util/hash.hpp"

namespace npusim::config {
namespace {

using U = Unit;

void reflect_fractal(Visitor& v, std::string_view name, FractalParams& f, FractalParams d, std::string_view doc) {
  Group g(v, name, doc);
  v.integer("m", f.m, U::kCount, d.m, "rows of A per fractal");
  v.integer("k", f.k, U::kCount, d.k, "reduction depth per fractal");
  v.integer("n", f.n, U::kCount, d.n, "columns of B per fractal");
  v.integer("cycles", f.cycles, U::kCycles, d.cycles, "cycles per fractal (issue interval)");
}

void reflect_path(Visitor& v, std::string_view name, PathParams& p, double rate, std::uint64_t setup,
                  std::string_view doc) {
  Group g(v, name, doc);
  v.real("bytes_per_cycle", p.bytes_per_cycle, U::kBytesPerCycle, rate, "sustained transfer rate of the path");
  v.integer("setup_cycles", p.setup_cycles, U::kCycles, setup, "fixed cost per copy instruction");
}

void reflect_buffer(Visitor& v, std::string_view name, BufferParams& b, Default<std::uint64_t> size,
                    std::uint64_t align, std::string_view doc) {
  Group g(v, name, doc);
  v.integer("size", b.size, U::kBytes, size, "capacity");
  v.integer("align", b.align, U::kBytes, align, "required address alignment");
}

}  // namespace

void reflect(Visitor& v, ChipConfig& c) {
  v.text("name", c.name, kRequired, "config name shown by `npusim info` and in every report", {});
  v.text("description", c.description, std::string(), "free text describing the chip", {});

  {
    Group g(v, "clock", "clock domains");
    v.real("core", c.clock.core_hz, U::kFrequency, kRequired, "AI-core clock; cycles in reports are of this clock");
    v.real("control_cpu", c.clock.control_cpu_hz, U::kFrequency, 1.0e9,
           "task-scheduler control CPU clock (assumed)");
  }
  {
    Group g(v, "cores", "core organisation");
    v.text("organisation", c.cores.organisation, kRequired,
           "split: separate AIC (Cube) and AIV (Vector) cores; coupled: each core has both", {"split", "coupled"});
    v.integer("ai_cores", c.cores.ai_cores, U::kCount, 0, "coupled: AI cores with Cube and Vector");
    v.integer("aic", c.cores.aic, U::kCount, 0, "split: cube cores (AIC)");
    v.integer("aiv", c.cores.aiv, U::kCount, 0, "split: vector cores (AIV)");
    v.integer("aiv_per_aic", c.cores.aiv_per_aic, U::kCount, 2, "split: AIV cores grouped with one AIC");
    v.integer("vector_cores", c.cores.vector_cores, U::kCount, 0, "coupled: additional vector-only cores");
  }
  {
    Group g(v, "cube", "Cube unit: one fractal product per `cycles` cycles");
    reflect_fractal(v, "fp16", c.cube.fp16, {16, 16, 16, 1}, "fp16 inputs, fp32 accumulation");
    reflect_fractal(v, "bf16", c.cube.bf16, {16, 16, 16, 1}, "bf16 inputs, fp32 accumulation");
    reflect_fractal(v, "int8", c.cube.int8, {16, 32, 16, 1}, "int8 inputs, int32 accumulation");
    reflect_fractal(v, "fp32", c.cube.fp32, {16, 8, 16, 2}, "fp32 inputs, fp32 accumulation");
    v.integer("latency", c.cube.latency, U::kCycles, 16, "pipeline fill added once per Mmad (assumed)");
  }
  {
    Group g(v, "vector", "Vector unit: cycles = latency + ceil(cycles_per_repeat x repeats x 256 / bytes_per_repeat) - 1 "
                         "(the vendor cost model's latency + 2 x repeats - 1 at 256 B)");
    v.integer("bytes_per_repeat", c.vector.bytes_per_repeat, U::kBytes, 256,
              "datapath width: bytes processed every cycles_per_repeat cycles (an instruction's repeat is 256 B; a "
              "narrower datapath takes proportionally longer per repeat)");
    v.integer("block_bytes", c.vector.block_bytes, U::kBytes, 32, "bytes per block (stride unit)");
    v.integer("max_repeat", c.vector.max_repeat, U::kCount, 255, "largest repeat count of one instruction");
    v.integer("cycles_per_repeat", c.vector.cycles_per_repeat, U::kCycles, 2, "issue interval between repeats");
    v.boolean("bank_conflicts", c.vector.bank_conflicts, true,
              "UB bank conflicts: per cycle a bank group serves one block read and one block write, a bank one of "
              "the two (docs/hw.md)");
    Group lat(v, "latency", "per-op pipeline latency in cycles (vendor cost model; unlisted ones assumed)");
    VectorLatencies& l = c.vector.latency;
    v.integer("add", l.add, U::kCycles, 6, "vadd");
    v.integer("sub", l.sub, U::kCycles, 6, "vsub (assumed equal to add)");
    v.integer("mul", l.mul, U::kCycles, 7, "vmul");
    v.integer("div", l.div, U::kCycles, 13, "vdiv");
    v.integer("max", l.max, U::kCycles, 6, "vmax (assumed equal to add)");
    v.integer("min", l.min, U::kCycles, 6, "vmin (assumed equal to add)");
    v.integer("adds", l.adds, U::kCycles, 6, "vector + scalar (assumed equal to add)");
    v.integer("muls", l.muls, U::kCycles, 7, "vector x scalar (assumed equal to mul)");
    v.integer("maxs", l.maxs, U::kCycles, 6, "max with scalar (assumed)");
    v.integer("mins", l.mins, U::kCycles, 6, "min with scalar (assumed)");
    v.integer("exp", l.exp, U::kCycles, 12, "vexp");
    v.integer("ln", l.ln, U::kCycles, 12, "vln (assumed equal to exp)");
    v.integer("abs", l.abs, U::kCycles, 6, "vabs (assumed)");
    v.integer("sqrt", l.sqrt, U::kCycles, 13, "vsqrt");
    v.integer("rsqrt", l.rsqrt, U::kCycles, 5, "vrsqrt");
    v.integer("reciprocal", l.reciprocal, U::kCycles, 13, "vrec (assumed equal to div)");
    v.integer("relu", l.relu, U::kCycles, 6, "vrelu (assumed)");
    v.integer("cast", l.cast, U::kCycles, 6, "vconv (assumed)");
    v.integer("duplicate", l.duplicate, U::kCycles, 6, "vector_dup (assumed)");
    v.integer("reduce", l.reduce, U::kCycles, 12, "whole-repeat and per-block reductions (assumed)");
    v.integer("compare", l.compare, U::kCycles, 6, "vcmp (assumed)");
    v.integer("select", l.select, U::kCycles, 6, "vsel (assumed)");
    v.integer("gather", l.gather, U::kCycles, 8, "Gather by per-lane offsets (assumed)");
    v.integer("transpose", l.transpose, U::kCycles, 8, "16x16 block transpose (assumed)");
  }
  {
    Group g(v, "mte", "copy paths of the MTE engines: cycles = setup_cycles + ceil(bytes / bytes_per_cycle)");
    reflect_path(v, "gm_to_ub", c.mte.gm_to_ub, 110, 30, "MTE2 GM -> UB (rate capped by the core's GM port)");
    reflect_path(v, "gm_to_l1", c.mte.gm_to_l1, 110, 30, "MTE2 GM -> L1, incl. ND->NZ");
    reflect_path(v, "ub_to_gm", c.mte.ub_to_gm, 64, 30, "MTE3 UB -> GM");
    reflect_path(v, "l1_to_l0a", c.mte.l1_to_l0a, 512, 4, "MTE1 L1 -> L0A");
    reflect_path(v, "l1_to_l0b", c.mte.l1_to_l0b, 256, 4, "MTE1 L1 -> L0B");
    reflect_path(v, "l1_to_ub", c.mte.l1_to_ub, 128, 4, "MTE1 L1 -> UB (coupled cores)");
    reflect_path(v, "ub_to_l1", c.mte.ub_to_l1, 128, 4, "MTE3 UB -> L1 (coupled cores, assumed)");
    reflect_path(v, "l0c_to_ub", c.mte.l0c_to_ub, 256, 4, "L0C -> UB (coupled cores)");
    reflect_path(v, "l1_to_bt", c.mte.l1_to_bt, 64, 4, "MTE1 L1 -> bias table, converting to fp32 (assumed; rate in BT bytes)");
  }
  reflect_path(v, "fixpipe", c.fixpipe, 128, 20, "FixPipe L0C -> GM/L1 with format conversion (assumed)");
  {
    Group g(v, "scalar", "scalar unit");
    v.integer("cycles_per_instruction", c.scalar.cycles_per_instruction, U::kCycles, 1,
              "cost of issuing one instruction or running one scalar op");
    v.integer("api_call_cycles", c.scalar.api_call_cycles, U::kCycles, 0,
              "scalar work of each kernel API call that issues pipe instructions (DataCopy, LoadData, Mmad, Fixpipe, a "
              "vector op): address arithmetic and parameter packing, on top of cycles_per_instruction per instruction "
              "(no published figure: 0 on the built-in chips)");
    v.integer("queue_call_cycles", c.scalar.queue_call_cycles, U::kCycles, 0,
              "scalar work of each TQue AllocTensor, EnQue, DeQue and FreeTensor: the queue's bookkeeping, on top of "
              "the flag instruction it issues (no published figure: 0 on the built-in chips)");
  }
  {
    Group g(v, "queues", "pipe queue depths in instructions; issue stalls while the target queue is full (assumed)");
    v.integer("s", c.queues.s, U::kCount, 32, "scalar pipe");
    v.integer("mte1", c.queues.mte1, U::kCount, 32, "MTE1");
    v.integer("mte2", c.queues.mte2, U::kCount, 32, "MTE2");
    v.integer("mte3", c.queues.mte3, U::kCount, 32, "MTE3");
    v.integer("m", c.queues.m, U::kCount, 32, "Cube");
    v.integer("v", c.queues.v, U::kCount, 32, "Vector");
    v.integer("fix", c.queues.fix, U::kCount, 32, "FixPipe");
  }
  {
    Group g(v, "flags", "synchronisation flags");
    v.integer("event_ids", c.flags.event_ids, U::kCount, 8, "event ids per (src, dst) pipe pair");
    v.integer("cross_core_ids", c.flags.cross_core_ids, U::kCount, 11, "cross-core flag ids");
    v.integer("cross_core_max_pending", c.flags.cross_core_max_pending, U::kCount, 16,
              "pending sets a cross-core flag counter holds before saturating");
    v.integer("cross_core_latency", c.flags.cross_core_latency, U::kCycles, 0,
              "cycles from a cross-core set firing to the count arriving at the waiting cores");
  }
  {
    Group g(v, "buffers", "on-core buffers");
    reflect_buffer(v, "l1", c.buffers.l1, kRequired, 32, "L1 buffer (cube side)");
    reflect_buffer(v, "l0a", c.buffers.l0a, kRequired, 512, "L0A, left Cube operand");
    reflect_buffer(v, "l0b", c.buffers.l0b, kRequired, 512, "L0B, right Cube operand");
    reflect_buffer(v, "l0c", c.buffers.l0c, kRequired, 64, "L0C, Cube accumulator");
    {
      Group ub(v, "ub", "Unified Buffer (vector side)");
      v.integer("size", c.buffers.ub.size, U::kBytes, kRequired, "capacity");
      v.integer("align", c.buffers.ub.align, U::kBytes, 32, "required address alignment");
      v.integer("bank_bytes", c.buffers.ub.bank_bytes, U::kBytes, 4096, "bytes per bank");
      v.integer("bank_groups", c.buffers.ub.bank_groups, U::kCount, 16, "bank groups; banks are split evenly");
    }
    reflect_buffer(v, "bias_table", c.buffers.bias_table, 0, 64, "bias table (0 = none)");
    reflect_buffer(v, "fixpipe_buffer", c.buffers.fixpipe_buffer, 0, 64, "FixPipe quantisation buffer (0 = none)");
  }
  {
    Group g(v, "simple_gm", "flat GM model used until the memory system is modelled: latency + bytes / rate");
    v.integer("read_latency", c.simple_gm.read_latency, U::kCycles, 1400, "GM read latency (vendor cost model)");
    v.integer("write_latency", c.simple_gm.write_latency, U::kCycles, 300, "GM write latency (vendor cost model)");
    v.real("bytes_per_cycle", c.simple_gm.bytes_per_cycle, U::kBytesPerCycle, 32, "per-core GM rate");
  }
  {
    Group g(v, "l2", "shared L2 cache");
    v.integer("capacity", c.l2.capacity, U::kBytes, kRequired, "total capacity over all slices");
    v.integer("line_bytes", c.l2.line_bytes, U::kBytes, 512, "line size");
    v.integer("ways", c.l2.ways, U::kCount, 16, "associativity (assumed)");
    v.integer("slices", c.l2.slices, U::kCount, kRequired, "address-hashed slices");
    v.integer("hit_latency", c.l2.hit_latency, U::kCycles, 50, "hit latency (vendor cost model)");
    v.integer("miss_latency", c.l2.miss_latency, U::kCycles, 150, "added on a miss (vendor cost model)");
    v.real("slice_bytes_per_cycle", c.l2.slice_bytes_per_cycle, U::kBytesPerCycle, kRequired,
           "bandwidth of one slice");
    v.text("replacement", c.l2.replacement, std::string("lru"), "replacement policy", {"lru", "random"});
    v.text("slice_hash", c.l2.slice_hash, std::string("xor"), "line-address to slice hash", {"xor", "modulo"});
  }
  {
    Group g(v, "hbm", "device memory: stacks -> channels -> pseudo-channels -> bank groups -> banks");
    v.text("kind", c.hbm.kind, std::string("HBM2e"), "memory technology shown by `npusim info`", {});
    v.integer("stacks", c.hbm.stacks, U::kCount, kRequired, "stacks (or DRAM packages)");
    v.integer("channels_per_stack", c.hbm.channels_per_stack, U::kCount, 8, "channels per stack");
    v.integer("pseudo_channels", c.hbm.pseudo_channels, U::kCount, 2, "pseudo-channels per channel (1 = legacy)");
    v.integer("bank_groups", c.hbm.bank_groups, U::kCount, 4, "bank groups per pseudo-channel");
    v.integer("banks_per_group", c.hbm.banks_per_group, U::kCount, 4, "banks per bank group");
    v.integer("row_bytes", c.hbm.row_bytes, U::kBytes, 1024, "row (page) size");
    v.integer("bus_bits", c.hbm.bus_bits, U::kCount, 64, "data bus width of one pseudo-channel, bits");
    v.integer("burst_bytes", c.hbm.burst_bytes, U::kBytes, 32, "bytes per burst (access granularity)");
    v.real("pin_rate", c.hbm.pin_rate, U::kBitRate, kRequired, "data rate per pin");
    v.integer("capacity", c.hbm.capacity, U::kBytes, kRequired, "device memory capacity");
    v.real("controller_latency", c.hbm.controller_latency, U::kTime, 10.0,
           "memory-controller queueing and PHY latency (assumed)");
    v.integer("queue_depth", c.hbm.queue_depth, U::kCount, 32,
              "transaction queue per pseudo-channel: a request holds a slot from its arrival until its last column "
              "command issues (32, as DRAMsim3 and Ramulator)");
    v.integer("bank_queue_depth", c.hbm.bank_queue_depth, U::kCount, 16,
              "command queue per bank: requests to one bank whose column commands have not issued (16, DRAMsim3's "
              "per-bank command queue)");
    v.integer("write_buffer", c.hbm.write_buffer, U::kCount, 32,
              "posted writes a pseudo-channel holds while reads go first (32, Ramulator's write queue; 0: no buffer, "
              "each write is served when it arrives)");
    v.real("write_high", c.hbm.write_high, U::kNumber, 0.8,
           "write-buffer fill (fraction of write_buffer) at which writes drain even while reads wait (Ramulator)");
    v.real("write_low", c.hbm.write_low, U::kNumber, 0.2,
           "write-buffer fill a drain goes down to (Ramulator); with no read waiting, every write drains");
    v.text("address_mapping", c.hbm.address_mapping, std::string("ro_ba_co_ch_co8_bg"),
           "address fields above the burst offset, most to least significant: ro(w), ba(nk), ch(annel: "
           "pseudo-channel), bg (bank group), co(lumn), coN (a field of N columns, the rest in co); the default "
           "alternates bank groups every burst and fills 1 KiB of a pseudo-channel before the next",
           {});
    v.boolean("row_hash", c.hbm.row_hash, true,
              "rotate the bank and pseudo-channel of an address by a hash of its row, as controllers do, so that "
              "power-of-two strides spread over banks and channels");
    v.text("page_policy", c.hbm.page_policy, std::string("open"), "row buffer policy", {"open", "closed"});
    v.text("refresh", c.hbm.refresh, std::string("all_bank"), "refresh mode", {"all_bank", "per_bank", "none"});
    v.text("scheduler", c.hbm.scheduler, std::string("fr_fcfs"),
           "request order within a bank: fr_fcfs (a row hit is served before an older request that must close the "
           "row, as controllers do) or fcfs (each bank's requests in arrival order)",
           {"fr_fcfs", "fcfs"});
    v.integer("scheduler_cap", c.hbm.scheduler_cap, U::kCount, 16,
              "fr_fcfs: younger row hits that may pass one waiting request before it is served (starvation cap; "
              "16, as Ramulator's FRFCFS_Cap)");
    Group t(v, "timing", "DRAM timing parameters (HBM2e figures, roughly constant across pin rates)");
    HbmTiming& h = c.hbm.timing;
    v.real("tRCD", h.tRCD, U::kTime, 14.0, "activate to read/write");
    v.real("tRP", h.tRP, U::kTime, 14.0, "precharge to activate");
    v.real("tRAS", h.tRAS, U::kTime, 33.0, "activate to precharge");
    v.real("tRRD_S", h.tRRD_S, U::kTime, 4.0, "activate to activate, different bank groups");
    v.real("tRRD_L", h.tRRD_L, U::kTime, 6.0,
           "activate to activate, another bank of the same bank group (DRAMsim3 HBM2)");
    v.real("tFAW", h.tFAW, U::kTime, 16.0, "window holding at most four activates");
    v.real("tWR", h.tWR, U::kTime, 15.0, "write recovery before precharge");
    v.real("tWTR_L", h.tWTR_L, U::kTime, 7.5, "write to read, same bank group");
    v.real("tWTR_S", h.tWTR_S, U::kTime, 2.5, "write to read, different bank group");
    v.real("tCCD_S", h.tCCD_S, U::kTime, 0.0,
           "column to column, different bank group; at least one burst (0: a burst, as HBM's BL4 takes 2 tCK)");
    v.real("tCCD_L", h.tCCD_L, U::kTime, 2.5, "column to column, same bank group (twice a burst at 3.2Gbps)");
    v.real("tRTP", h.tRTP, U::kTime, 7.5, "read to precharge (assumed)");
    v.real("tRTRS", h.tRTRS, U::kTime, 1.25,
           "data-bus turnaround from read data to write data (2 tCK at 3.2Gbps, DRAMsim3's default): "
           "tRTW = tCL + tBURST - tCWL + tRTRS");
    v.real("tCL", h.tCL, U::kTime, 16.0, "read latency, command to first data");
    v.real("tCWL", h.tCWL, U::kTime, 8.0, "write latency (assumed)");
    v.real("tRFC", h.tRFC, U::kTime, 350.0, "all-bank refresh cycle time");
    v.real("tRFCpb", h.tRFCpb, U::kTime, 160.0, "per-bank refresh cycle time");
    v.real("tREFI", h.tREFI, U::kTime, 3900.0, "refresh interval");
  }
  {
    Group g(v, "noc", "interconnect between cores, L2 slices and memory controllers");
    v.text("topology", c.noc.topology, std::string("crossbar"), "interconnect topology policy", {"crossbar"});
    v.integer("latency", c.noc.latency, U::kCycles, 20, "one-way core to L2 slice latency (assumed)");
    v.real("core_read_bytes_per_cycle", c.noc.core_read_bytes_per_cycle, U::kBytesPerCycle, 110,
           "per-core read port into the interconnect");
    v.real("core_write_bytes_per_cycle", c.noc.core_write_bytes_per_cycle, U::kBytesPerCycle, 86,
           "per-core write port into the interconnect");
    v.integer("core_outstanding", c.noc.core_outstanding, U::kCount, 96,
              "requests of request_bytes a core may have in flight per direction; a copy waits for as many of the "
              "oldest as it takes (calibrated for 910b, assumed elsewhere: docs/calibration.md)");
    v.integer("request_bytes", c.noc.request_bytes, U::kBytes, 512,
              "bytes per request a core sends into the interconnect: a copy of B bytes takes ceil(B / request_bytes) "
              "of the core_outstanding slots (the 910B L2 line)");
    v.real("l2_to_hbm_bytes_per_cycle", c.noc.l2_to_hbm_bytes_per_cycle, U::kBytesPerCycle, 64,
           "link from the L2 to one pseudo-channel controller (assumed)");
  }
  {
    Group g(v, "sdma", "system DMA engines for device-to-device and host copies");
    v.integer("engines", c.sdma.engines, U::kCount, 4, "engines (assumed)");
    v.real("bandwidth", c.sdma.bandwidth, U::kBandwidth, 100e9, "per engine (assumed)");
    v.real("latency", c.sdma.latency, U::kTime, 1000.0, "start-up latency per copy (assumed)");
  }
  {
    Group g(v, "host_link", "host <-> device link");
    v.real("bandwidth", c.host_link.bandwidth, U::kBandwidth, 32e9, "per direction (PCIe 4.0 x16, assumed)");
    v.real("latency", c.host_link.latency, U::kTime, 2000.0, "per transfer (assumed)");
  }
  {
    Group g(v, "launch", "kernel launch path on the device");
    v.real("dispatch", c.launch.dispatch, U::kTime, 150.0, "task scheduler to core dispatch");
    v.real("core_startup", c.launch.core_startup, U::kTime, 50.0, "core start-up");
    v.real("kernel_init", c.launch.kernel_init, U::kTime, 1000.0, "kernel software init (arguments, tiling data)");
    v.real("completion", c.launch.completion, U::kTime, 500.0, "completion report");
    v.text("dispatch_order", c.launch.dispatch_order, std::string("fifo"),
           "how the task scheduler hands free cores to the kernels in flight: fifo (the oldest kernel takes every free "
           "core it can use, then the next) or fair (each free core to the kernel running the fewest blocks)",
           {"fifo", "fair"});
  }
  {
    Group g(v, "host", "host-side API costs on the simulated timeline");
    v.real("launch_overhead", c.host.launch_overhead, U::kTime, 9000.0,
           "host time to enqueue one kernel (measured 8.6-12us on 910B2)");
    v.real("memcpy_overhead", c.host.memcpy_overhead, U::kTime, 5000.0, "host time per memcpy call (assumed)");
    v.real("sync_overhead", c.host.sync_overhead, U::kTime, 2000.0, "host time per synchronize (assumed)");
    v.real("event_overhead", c.host.event_overhead, U::kTime, 1000.0, "host time per event call (assumed)");
  }
  {
    Group g(v, "driver", "how the host driver learns that tasks completed");
    v.text("completion", c.driver.completion, std::string("interrupt"),
           "interrupt: the host wakes interrupt_latency after a completion is written; poll: the host reads the "
           "completion ring every poll_interval",
           {"interrupt", "poll"});
    v.real("interrupt_latency", c.driver.interrupt_latency, U::kTime, 2000.0, "completion to host wake-up (assumed)");
    v.real("poll_interval", c.driver.poll_interval, U::kTime, 1000.0, "between reads of the completion ring (assumed)");
  }
  {
    Group g(v, "sim", "simulation knobs (no hardware meaning)");
    v.integer("chunk_bytes", c.sim.chunk_bytes, U::kBytes, 4096, "granularity of modelled memory traffic");
    v.text("memory_model", c.sim.memory_model, std::string("detailed"),
           "GM behind the cores: detailed (interconnect, L2, HBM) or simple (simple_gm: latency + per-core rate)",
           {"detailed", "simple"});
    v.real("counter_interval", c.sim.counter_interval, U::kTime, 1000.0,
           "width of the time bins behind the trace's memory counters (HBM GB/s, L2 hit rate)");
    v.integer("max_instructions", c.sim.max_instructions, U::kCount, std::uint64_t{1} << 27,
              "most instructions one kernel launch may issue over all its blocks: a launch that would issue more is "
              "refused before it runs when its op can tell (flash_attention), stopped when it gets there otherwise "
              "(a kernel that never ends); each instruction costs about 0.7 us and 30-60 B of host memory to "
              "simulate");
    v.integer("max_cores", c.sim.max_cores, U::kCount, kMaxCores,
              "most cores of all kinds a chip may have (also L2 slices, SDMA engines, HBM pseudo-channels): each "
              "costs host memory and a SystemC thread; a config past it is refused");
    v.integer("max_queue_depth", c.sim.max_queue_depth, U::kCount, kMaxQueueDepth,
              "most entries a queue, a flag's pending count, a core's requests in flight, a pseudo-channel's banks "
              "or an L2 set's ways may have (host state per entry)");
    v.integer("max_l2_lines", c.sim.max_l2_lines, U::kCount, kMaxL2Lines,
              "most lines (l2.capacity / l2.line_bytes) the L2 model may hold (its tag arrays; 64 GiB of L2 took "
              "4 GB of host memory)");
    v.integer("max_buffer_bytes", c.sim.max_buffer_bytes, U::kBytes, kMaxLocalBufferBytes,
              "most bytes each of a core's local buffers may have (functional mode holds every core's buffers)");
    v.boolean("sanitize", c.sim.sanitize, false,
              "check every local-buffer access for races between pipes, and flags left set (--sanitize; "
              "docs/kernel-sdk.md)");
  }
}

namespace {

constexpr double kMinClockHz = 1e6, kMaxClockHz = 50e9;

bool pow2(std::uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// The product of config values, or none when it passes 2^64: each key may be up to 2^64 - 1, and a product that
// wrapped to 0 once divided by zero here (issue 23). The host limits then name the key.
std::optional<std::uint64_t> product(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t p = 1;
  for (std::uint64_t f : factors)
    if (__builtin_mul_overflow(p, f, &p)) return std::nullopt;
  return p;
}

std::string bytes(std::uint64_t b) { return format_value(static_cast<double>(b), Unit::kBytes); }

}  // namespace

AddressFields parse_address_mapping(const HbmParams& h) {
  AddressFields out;
  const std::uint64_t cols = h.burst_bytes ? h.row_bytes / h.burst_bytes : 0;
  int seen[6] = {0, 0, 0, 0, 0, 0};
  std::stringstream ss(h.address_mapping);
  for (std::string f; std::getline(ss, f, '_');) {
    AddressFields::Field field = AddressFields::kRow;
    if (f == "ro")
      field = AddressFields::kRow;
    else if (f == "ba")
      field = AddressFields::kBank;
    else if (f == "ch")
      field = AddressFields::kChannel;
    else if (f == "co")
      field = AddressFields::kColumn;
    else if (f == "bg")
      field = AddressFields::kBankGroup;
    else if (f.size() > 2 && f.size() < 12 && f.compare(0, 2, "co") == 0 &&
             f.find_first_not_of("0123456789", 2) == std::string::npos) {
      field = AddressFields::kColumnLow;
      const std::uint64_t n = std::stoull(f.substr(2));
      if (n == 0 || cols == 0 || cols % n != 0) {
        out.error = "'" + f + "' must divide the " + std::to_string(cols) + " columns of a row";
        return out;
      }
      out.low_columns = static_cast<std::uint32_t>(n);
    } else {
      out.error = "unknown field '" + f + "' (ro, ba, ch, bg, co, coN)";
      return out;
    }
    if (seen[field]++) {
      out.error = "field '" + f + "' appears twice";
      return out;
    }
    out.msb_first.push_back(field);
  }
  if (!seen[AddressFields::kRow] || !seen[AddressFields::kBank] || !seen[AddressFields::kChannel] ||
      !seen[AddressFields::kColumn] || !seen[AddressFields::kBankGroup] ||
      out.msb_first.front() != AddressFields::kRow) {
    out.error = "needs the fields ro, ba, ch, co and bg (optionally coN), ro first";
  }
  return out;
}

namespace {

// Keys that size the simulator's own memory (per core, per bank, per line...), with the most it takes: values far
// beyond any chip the configs describe, refused before anything is allocated so that a typo cannot take the host's
// memory (issue 23). docs/config.md, "Limits".
void check_host_limits(const ChipConfig& c, const std::function<void(std::string, std::string)>& add) {
  // The limits themselves, from sim.max_* (raised there when a big design needs it), below the models' ceilings.
  auto limit = [&](const char* key, std::uint64_t value, std::uint64_t ceiling) {
    if (value > ceiling) {
      add(key, std::to_string(value) + " is more than " + std::to_string(ceiling) +
                   ", the most the models can index (a limit, not a size: see docs/config.md, \"Limits\")");
      return ceiling;
    }
    return value;
  };
  const std::uint64_t max_cores = limit("sim.max_cores", c.sim.max_cores, kCeilingCores);
  const std::uint64_t max_depth = limit("sim.max_queue_depth", c.sim.max_queue_depth, kCeilingQueueDepth);
  const std::uint64_t max_lines = limit("sim.max_l2_lines", c.sim.max_l2_lines, kCeilingL2Lines);
  const std::uint64_t max_buffer = limit("sim.max_buffer_bytes", c.sim.max_buffer_bytes, kCeilingBufferBytes);
  // "V is more than L, the most WHAT (sim.KEY; raise it with --set sim.KEY=N)"; fixed limits name no key.
  auto at_most = [&](const std::string& key, std::uint64_t value, std::uint64_t max, const std::string& what,
                     const char* limit_key) {
    if (value <= max) return;
    std::string msg = std::to_string(value) + " is more than " + std::to_string(max) + ", the most " + what;
    if (limit_key) msg.append(" (").append(limit_key).append("; a config may raise it)");
    add(key, msg);
  };
  const bool split = c.cores.organisation == "split";
  const std::uint64_t a = split ? c.cores.aic : c.cores.ai_cores, b = split ? c.cores.aiv : c.cores.vector_cores;
  if (a > max_cores || b > max_cores || a + b > max_cores) {
    add(split ? (c.cores.aiv > c.cores.aic ? "cores.aiv" : "cores.aic") : "cores.ai_cores",
        std::to_string(a) + " + " + std::to_string(b) + " cores of all kinds are more than " +
            std::to_string(max_cores) + ", the most a chip may have (sim.max_cores; a config may raise it)");
  }
  at_most("flags.event_ids", c.flags.event_ids, kMaxFlagIds, "event ids a pipe pair may have", nullptr);
  at_most("flags.cross_core_ids", c.flags.cross_core_ids, kMaxFlagIds, "cross-core flag ids a chip may have", nullptr);
  at_most("flags.cross_core_max_pending", c.flags.cross_core_max_pending, max_depth, "pending counts a flag may hold",
          "sim.max_queue_depth");
  at_most("noc.core_outstanding", c.noc.core_outstanding, max_depth, "requests a core may have in flight",
          "sim.max_queue_depth");
  at_most("hbm.queue_depth", c.hbm.queue_depth, max_depth, "requests a pseudo-channel queue may hold",
          "sim.max_queue_depth");
  at_most("hbm.bank_queue_depth", c.hbm.bank_queue_depth, max_depth, "requests a bank's command queue may hold",
          "sim.max_queue_depth");
  at_most("hbm.write_buffer", c.hbm.write_buffer, max_depth, "writes a pseudo-channel's write buffer may hold",
          "sim.max_queue_depth");
  at_most("sdma.engines", c.sdma.engines, max_cores, "SDMA engines a chip may have", "sim.max_cores");
  at_most("l2.slices", c.l2.slices, max_cores, "L2 slices a chip may have", "sim.max_cores");
  at_most("hbm.pseudo_channels",
          product({c.hbm.stacks, c.hbm.channels_per_stack, c.hbm.pseudo_channels}).value_or(UINT64_MAX), max_cores,
          "pseudo-channels (stacks x channels_per_stack x pseudo_channels) a chip may have", "sim.max_cores");
  at_most("hbm.bank_groups", c.hbm.bank_groups, 64, "bank groups a pseudo-channel may have (a 64-bit mask)", nullptr);
  at_most("hbm.banks_per_group", product({c.hbm.bank_groups, c.hbm.banks_per_group}).value_or(UINT64_MAX), max_depth,
          "banks (bank_groups x banks_per_group) a pseudo-channel may have", "sim.max_queue_depth");
  at_most("l2.ways", c.l2.ways, max_depth, "ways an L2 set may have", "sim.max_queue_depth");
  at_most("hbm.row_bytes", c.hbm.row_bytes, kMaxRowBytes, "bytes a DRAM row may have", nullptr);
  at_most("l2.line_bytes", c.l2.line_bytes, kMaxRowBytes, "bytes an L2 line may have", nullptr);
  if (c.sim.counter_interval > kMaxCounterIntervalNs) {
    add("sim.counter_interval", format_value(c.sim.counter_interval, Unit::kTime) + " is more than " +
                                    format_value(kMaxCounterIntervalNs, Unit::kTime) + ", the widest counter bin");
  }
  if (c.l2.line_bytes != 0 && c.l2.capacity / c.l2.line_bytes > max_lines) {
    add("l2.capacity", bytes(c.l2.capacity) + " in lines of " + bytes(c.l2.line_bytes) + " is more than " +
                           std::to_string(max_lines) + " lines (" +
                           bytes(product({max_lines, c.l2.line_bytes}).value_or(UINT64_MAX)) +
                           "), the most the L2 model holds (sim.max_l2_lines; a config may raise it)");
  }
  for (const auto& [key, size] : {std::pair<const char*, std::uint64_t>{"buffers.l1.size", c.buffers.l1.size},
                                  {"buffers.l0a.size", c.buffers.l0a.size},
                                  {"buffers.l0b.size", c.buffers.l0b.size},
                                  {"buffers.l0c.size", c.buffers.l0c.size},
                                  {"buffers.ub.size", c.buffers.ub.size},
                                  {"buffers.bias_table.size", c.buffers.bias_table.size},
                                  {"buffers.fixpipe_buffer.size", c.buffers.fixpipe_buffer.size}}) {
    if (size > max_buffer) {
      add(key, bytes(size) + " is more than " + bytes(max_buffer) +
                   ", the most a core's buffer may have (sim.max_buffer_bytes; a config may raise it)");
    }
  }
}

}  // namespace

std::vector<Problem> check_consistency(const ChipConfig& c) {
  std::vector<Problem> p;
  auto add = [&](std::string key, std::string msg) { p.push_back({std::move(key), std::move(msg)}); };

  // Clocks within [1 MHz, 50 GHz]: the simulated time base has a 1 ps resolution, so a period under 20 ps would be
  // rounded by more than 2.5 % (and one under 0.5 ps to zero), and a clock under 1 MHz makes a kernel of a few
  // thousand cycles take simulated seconds, which nothing here is meant to model (issue 23).
  for (const auto& [key, hz] : {std::pair<const char*, double>{"clock.core", c.clock.core_hz}, {"clock.control_cpu", c.clock.control_cpu_hz}}) {
    if (!(hz >= kMinClockHz && hz <= kMaxClockHz))
      add(key, format_value(hz, Unit::kFrequency) + " is outside [1MHz, 50GHz]");
  }

  const CoreParams& k = c.cores;
  if (k.organisation == "split") {
    if (k.aic == 0) add("cores.aic", "a split chip needs at least one AIC");
    if (k.aiv_per_aic == 0) add("cores.aiv_per_aic", "a split chip needs at least one AIV per AIC");
    if (k.aiv != k.aic * k.aiv_per_aic) {
      add("cores.aiv", "is " + std::to_string(k.aiv) + " but aic x aiv_per_aic = " +
                           std::to_string(k.aic * k.aiv_per_aic));
    }
    if (k.ai_cores != 0) add("cores.ai_cores", "must be 0 on a split chip (use cores.aic and cores.aiv)");
    if (k.vector_cores != 0) add("cores.vector_cores", "must be 0 on a split chip (use cores.aiv)");
  } else {
    if (k.ai_cores == 0) add("cores.ai_cores", "a coupled chip needs at least one AI core");
    if (k.aic != 0) add("cores.aic", "must be 0 on a coupled chip (use cores.ai_cores)");
    if (k.aiv != 0) add("cores.aiv", "must be 0 on a coupled chip (use cores.vector_cores)");
  }

  struct Fr {
    const char* key;
    const FractalParams& f;
    std::uint64_t in_bytes;
    std::uint64_t acc_bytes;
  };
  const Fr fractals[] = {{"cube.fp16", c.cube.fp16, 2, 4},
                         {"cube.bf16", c.cube.bf16, 2, 4},
                         {"cube.int8", c.cube.int8, 1, 4},
                         {"cube.fp32", c.cube.fp32, 4, 4}};
  for (const Fr& fr : fractals) {
    const std::string base = fr.key;
    if (fr.f.m == 0) add(base + ".m", "must be positive");
    if (fr.f.k == 0) add(base + ".k", "must be positive");
    if (fr.f.n == 0) add(base + ".n", "must be positive");
    if (fr.f.cycles == 0) add(base + ".cycles", "must be positive");
    const std::uint64_t a = fr.f.m * fr.f.k * fr.in_bytes;
    const std::uint64_t b = fr.f.k * fr.f.n * fr.in_bytes;
    const std::uint64_t acc = fr.f.m * fr.f.n * fr.acc_bytes;
    if (c.buffers.l0a.size < a) {
      add("buffers.l0a.size", bytes(c.buffers.l0a.size) + " is smaller than one " + base + " A fractal (" +
                                  bytes(a) + ")");
    }
    if (c.buffers.l0b.size < b) {
      add("buffers.l0b.size", bytes(c.buffers.l0b.size) + " is smaller than one " + base + " B fractal (" +
                                  bytes(b) + ")");
    }
    if (c.buffers.l0c.size < acc) {
      add("buffers.l0c.size", bytes(c.buffers.l0c.size) + " is smaller than one " + base + " accumulator fractal (" +
                                  bytes(acc) + ")");
    }
  }

  struct Buf {
    const char* key;
    const BufferParams& b;
    bool may_be_empty;
  };
  const Buf bufs[] = {{"buffers.l1", c.buffers.l1, false},
                      {"buffers.l0a", c.buffers.l0a, false},
                      {"buffers.l0b", c.buffers.l0b, false},
                      {"buffers.l0c", c.buffers.l0c, false},
                      {"buffers.ub", c.buffers.ub, false},
                      {"buffers.bias_table", c.buffers.bias_table, true},
                      {"buffers.fixpipe_buffer", c.buffers.fixpipe_buffer, true}};
  for (const Buf& b : bufs) {
    const std::string base = b.key;
    if (!pow2(b.b.align)) {
      add(base + ".align", "must be a power of two");
      continue;
    }
    if (b.b.size == 0 && !b.may_be_empty) add(base + ".size", "must be positive");
    if (b.b.size % b.b.align != 0) {
      add(base + ".size", bytes(b.b.size) + " is not a multiple of its alignment " + bytes(b.b.align));
    }
  }
  const UbParams& ub = c.buffers.ub;
  if (ub.bank_bytes == 0) {
    add("buffers.ub.bank_bytes", "must be positive");
  } else if (ub.size % ub.bank_bytes != 0) {
    add("buffers.ub.size", bytes(ub.size) + " is not a multiple of the bank size " + bytes(ub.bank_bytes));
  } else if (ub.bank_groups == 0 || ub.banks() % ub.bank_groups != 0) {
    // The three keys make the geometry together: the message names the others to change with the one blamed.
    const std::uint64_t whole = ub.bank_bytes * std::max<std::uint64_t>(ub.bank_groups, 1);
    p.push_back({"buffers.ub.bank_groups",
                 bytes(ub.size) + " of UB in banks of " + bytes(ub.bank_bytes) + " is " + std::to_string(ub.banks()) +
                     " banks, which " + std::to_string(ub.bank_groups) +
                     " bank groups cannot split evenly: set buffers.ub.size to a multiple of " + bytes(whole) +
                     ", or buffers.ub.bank_groups to a divisor of " + std::to_string(ub.banks()) + " with it",
                 {"buffers.ub.size", "buffers.ub.bank_bytes"}});
  }

  const VectorParams& vec = c.vector;
  if (vec.block_bytes == 0 || vec.bytes_per_repeat == 0 || vec.bytes_per_repeat % vec.block_bytes != 0) {
    add("vector.bytes_per_repeat", "must be a positive multiple of vector.block_bytes");
  }
  if (vec.max_repeat == 0) add("vector.max_repeat", "must be positive");
  if (vec.cycles_per_repeat == 0) add("vector.cycles_per_repeat", "must be positive");
  if (ub.size != 0 && vec.bytes_per_repeat > ub.size) {
    add("vector.bytes_per_repeat", "is larger than the UB");
  }

  struct Path {
    const char* key;
    const PathParams& p;
  };
  const Path paths[] = {{"mte.gm_to_ub", c.mte.gm_to_ub},   {"mte.gm_to_l1", c.mte.gm_to_l1},
                        {"mte.ub_to_gm", c.mte.ub_to_gm},   {"mte.l1_to_l0a", c.mte.l1_to_l0a},
                        {"mte.l1_to_l0b", c.mte.l1_to_l0b}, {"mte.l1_to_ub", c.mte.l1_to_ub},
                        {"mte.ub_to_l1", c.mte.ub_to_l1},   {"mte.l0c_to_ub", c.mte.l0c_to_ub}, {"mte.l1_to_bt", c.mte.l1_to_bt},
                        {"fixpipe", c.fixpipe}};
  for (const Path& path : paths) {
    if (path.p.bytes_per_cycle <= 0) add(std::string(path.key) + ".bytes_per_cycle", "must be positive");
  }
  if (c.scalar.cycles_per_instruction == 0) add("scalar.cycles_per_instruction", "must be positive");

  const std::pair<const char*, std::uint64_t> queues[] = {{"queues.s", c.queues.s},     {"queues.mte1", c.queues.mte1},
                                                          {"queues.mte2", c.queues.mte2}, {"queues.mte3", c.queues.mte3},
                                                          {"queues.m", c.queues.m},     {"queues.v", c.queues.v},
                                                          {"queues.fix", c.queues.fix}};
  for (const auto& [key, depth] : queues) {
    if (depth == 0) add(key, "a queue needs room for at least one instruction");
  }
  if (c.flags.event_ids == 0) add("flags.event_ids", "must be positive");
  if (c.flags.cross_core_max_pending == 0) add("flags.cross_core_max_pending", "must be positive");
  if (c.flags.cross_core_latency > 1000000) add("flags.cross_core_latency", "must be at most 1000000 cycles");
  if (c.scalar.api_call_cycles > 1000000) add("scalar.api_call_cycles", "must be at most 1000000 cycles");
  if (c.scalar.queue_call_cycles > 1000000) add("scalar.queue_call_cycles", "must be at most 1000000 cycles");

  if (c.simple_gm.bytes_per_cycle <= 0) add("simple_gm.bytes_per_cycle", "must be positive");

  const L2Params& l2 = c.l2;
  if (!pow2(l2.line_bytes)) add("l2.line_bytes", "must be a power of two");
  if (l2.ways == 0) add("l2.ways", "must be positive");
  if (l2.slices == 0) add("l2.slices", "must be positive");
  if (l2.slice_bytes_per_cycle <= 0) add("l2.slice_bytes_per_cycle", "must be positive");
  const std::optional<std::uint64_t> set_bytes = product({l2.line_bytes, l2.ways, l2.slices});
  if (pow2(l2.line_bytes) && l2.ways && l2.slices && set_bytes) {
    if (l2.capacity == 0 || l2.capacity % *set_bytes != 0) {
      p.push_back({"l2.capacity",
                   "l2.capacity " + bytes(l2.capacity) +
                       " is not a positive multiple of line_bytes x ways x slices = " + bytes(*set_bytes),
                   {"l2.line_bytes", "l2.ways", "l2.slices"}});
    }
  }

  const HbmParams& h = c.hbm;
  if (h.stacks == 0) add("hbm.stacks", "must be positive");
  if (h.channels_per_stack == 0) add("hbm.channels_per_stack", "must be positive");
  if (h.pseudo_channels == 0) add("hbm.pseudo_channels", "must be positive");
  if (h.bank_groups == 0) add("hbm.bank_groups", "must be positive");
  if (h.banks_per_group == 0) add("hbm.banks_per_group", "must be positive");
  if (!pow2(h.row_bytes)) add("hbm.row_bytes", "must be a power of two");
  if (h.bus_bits == 0 || h.bus_bits % 8 != 0) add("hbm.bus_bits", "must be a positive multiple of 8");
  if (h.pin_rate <= 0) add("hbm.pin_rate", "must be positive");
  if (!pow2(h.burst_bytes)) {
    add("hbm.burst_bytes", "must be a power of two");
  } else if (h.bus_bits % 8 == 0 && h.bus_bits != 0 && h.burst_bytes % (h.bus_bits / 8) != 0) {
    add("hbm.burst_bytes", "must be a whole number of bus beats (" + std::to_string(h.bus_bits / 8) + " B)");
  } else if (pow2(h.row_bytes) && h.burst_bytes > h.row_bytes) {
    add("hbm.burst_bytes", "is larger than a row");
  }
  const std::optional<std::uint64_t> bank_rows =
      product({h.stacks, h.channels_per_stack, h.pseudo_channels, h.bank_groups, h.banks_per_group, h.row_bytes});
  if (bank_rows && *bank_rows != 0 && pow2(h.row_bytes) && (h.capacity == 0 || h.capacity % *bank_rows != 0)) {
    p.push_back({"hbm.capacity",
                 "hbm.capacity " + bytes(h.capacity) +
                     " is not a positive multiple of banks x row_bytes = " + bytes(*bank_rows),
                 {"hbm.stacks", "hbm.channels_per_stack", "hbm.pseudo_channels", "hbm.bank_groups",
                  "hbm.banks_per_group", "hbm.row_bytes"}});
  }
  if (h.queue_depth == 0) add("hbm.queue_depth", "must be positive");
  if (h.bank_queue_depth == 0) add("hbm.bank_queue_depth", "must be positive");
  if (!(h.write_high > 0 && h.write_high <= 1)) add("hbm.write_high", "must be in (0, 1]");
  if (!(h.write_low >= 0 && h.write_low < h.write_high)) add("hbm.write_low", "must be in [0, write_high)");
  if (h.timing.tRAS < h.timing.tRCD) add("hbm.timing.tRAS", "must be at least tRCD");
  // Between two refreshes a row must fit: activated, open tRAS and precharged (tRP) before the next one.
  const bool per_bank = h.refresh == "per_bank";
  if (h.refresh != "none" &&
      h.timing.tREFI <= (per_bank ? h.timing.tRFCpb : h.timing.tRFC) + h.timing.tRAS + h.timing.tRP)
    add("hbm.timing.tREFI", std::string("must exceed ") + (per_bank ? "tRFCpb" : "tRFC") +
                                " + tRAS + tRP (room to open and close a row between refreshes)");

  if (c.noc.core_read_bytes_per_cycle <= 0) add("noc.core_read_bytes_per_cycle", "must be positive");
  if (c.noc.core_write_bytes_per_cycle <= 0) add("noc.core_write_bytes_per_cycle", "must be positive");
  if (c.noc.l2_to_hbm_bytes_per_cycle <= 0) add("noc.l2_to_hbm_bytes_per_cycle", "must be positive");
  if (c.noc.core_outstanding == 0) add("noc.core_outstanding", "must be positive");
  if (c.noc.request_bytes == 0) add("noc.request_bytes", "must be positive");
  if (c.sdma.engines == 0) add("sdma.engines", "must be positive");
  if (c.driver.poll_interval <= 0) add("driver.poll_interval", "must be positive");
  if (c.sdma.bandwidth <= 0) add("sdma.bandwidth", "must be positive");
  if (c.host_link.bandwidth <= 0) add("host_link.bandwidth", "must be positive");
  if (c.sim.chunk_bytes == 0 || !pow2(c.sim.chunk_bytes)) add("sim.chunk_bytes", "must be a power of two");
  if (c.sim.max_instructions == 0) add("sim.max_instructions", "must be positive");
  if (const AddressFields f = parse_address_mapping(h); !f.error.empty()) {
    add("hbm.address_mapping", "'" + h.address_mapping + "': " + f.error);
  }
  if (c.clock.core_hz >= kMinClockHz && c.clock.core_hz <= kMaxClockHz &&
      !(c.sim.counter_interval * 1e-9 * c.clock.core_hz >= 1.0)) {
    // A bin narrower than a cycle was once widened to one cycle without a word (issue 23).
    add("sim.counter_interval", format_value(c.sim.counter_interval, Unit::kTime) +
                                    " is shorter than one core cycle (" +
                                    format_value(1e9 / c.clock.core_hz, Unit::kTime) + ")");
  }
  check_host_limits(c, add);
  return p;
}

namespace {

// Collects the declarations into KeyInfo rows.
class Describer : public Visitor {
 public:
  std::vector<KeyInfo> rows;

  void begin_group(std::string_view name, std::string_view) override { path_.emplace_back(name); }
  void end_group() override { path_.pop_back(); }
  void integer(std::string_view key, std::uint64_t&, Unit unit, Default<std::uint64_t> def,
               std::string_view doc) override {
    add(key, "integer", unit, def ? std::optional(format_value(static_cast<double>(*def), unit)) : std::nullopt,
        doc, {});
  }
  void real(std::string_view key, double&, Unit unit, Default<double> def, std::string_view doc) override {
    add(key, "real", unit, def ? std::optional(format_value(*def, unit)) : std::nullopt, doc, {});
  }
  void boolean(std::string_view key, bool&, Default<bool> def, std::string_view doc) override {
    add(key, "boolean", Unit::kCount, def ? std::optional<std::string>(*def ? "true" : "false") : std::nullopt, doc,
        {});
  }
  void text(std::string_view key, std::string&, Default<std::string> def, std::string_view doc,
            std::initializer_list<std::string_view> choices) override {
    add(key, "text", Unit::kCount, def, doc, std::vector<std::string>(choices.begin(), choices.end()));
  }

 private:
  void add(std::string_view key, std::string type, Unit unit, std::optional<std::string> def, std::string_view doc,
           std::vector<std::string> choices) {
    std::string full;
    for (const auto& p : path_) full += p + ".";
    full += key;
    rows.push_back({std::move(full), std::move(type), unit, std::move(def), std::string(doc), std::move(choices)});
  }
  std::vector<std::string> path_;
};

}  // namespace

std::vector<KeyInfo> describe_schema() {
  Describer d;
  ChipConfig scratch;
  reflect(d, scratch);
  return d.rows;
}

std::string exact_value_text(double value, Unit unit) {
  char buf[40];
  if (unit_is_integer(unit)) {
    std::snprintf(buf, sizeof buf, "%.0f", value);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.17g", value);
  std::string out = buf;
  switch (unit) {
    case Unit::kFrequency: return out + "Hz";
    case Unit::kBandwidth: return out + "B/s";
    case Unit::kBitRate: return out + "bps";
    case Unit::kTime: return out + "ns";
    default: return out;
  }
}

namespace {

// Reads every value out of a config.
class Reader : public Visitor {
 public:
  std::vector<ResolvedValue> rows;

  void begin_group(std::string_view name, std::string_view) override { path_.emplace_back(name); }
  void end_group() override { path_.pop_back(); }
  void integer(std::string_view key, std::uint64_t& v, Unit unit, Default<std::uint64_t>, std::string_view) override {
    add(key, "integer", unit, static_cast<double>(v), std::to_string(v));
  }
  void real(std::string_view key, double& v, Unit unit, Default<double>, std::string_view) override {
    add(key, "real", unit, v, exact_value_text(v, unit));
  }
  void boolean(std::string_view key, bool& v, Default<bool>, std::string_view) override {
    add(key, "boolean", Unit::kCount, v ? 1 : 0, v ? "true" : "false");
  }
  void text(std::string_view key, std::string& v, Default<std::string>, std::string_view,
            std::initializer_list<std::string_view>) override {
    add(key, "text", Unit::kCount, 0, v);
  }

 private:
  void add(std::string_view key, std::string type, Unit unit, double number, std::string text) {
    std::string full;
    for (const auto& p : path_) full += p + ".";
    full += key;
    rows.push_back({std::move(full), std::move(type), unit, number, std::move(text)});
  }
  std::vector<std::string> path_;
};

}  // namespace

std::vector<ResolvedValue> resolved_values(const ChipConfig& c) {
  Reader r;
  ChipConfig copy = c;  // reflect() takes a mutable config; reading does not change it
  reflect(r, copy);
  return r.rows;
}

std::string config_hash(const ChipConfig& c) {
  std::string all;
  for (const ResolvedValue& v : resolved_values(c)) {
    if (v.key == "name" || v.key == "description") continue;  // labels, not design points
    all += v.key + "=" + v.text + "\n";
  }
  return fnv1a_hex(all);
}

}  // namespace npusim::config
