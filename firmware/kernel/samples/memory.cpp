// Memory microbenchmarks: hbm_stream (every vector core streams GM -> UB and UB -> GM), l2_stream (a working set
// read again and again), latency_probe (dependent single reads). They move no meaningful data; their results are
// the memory section of the report (docs/memory.md).
#include <random>

#include "firmware/kernel/kernel_api.hpp"
#include "firmware/kernel/samples/samples.hpp"
#include "hw/mem/address_map.hpp"

namespace npusim::fw::kernel::samples {
namespace {

std::uint32_t vector_core_count(const config::ChipConfig& c) { return static_cast<std::uint32_t>(c.vector_units()); }

void require_detailed(hw::chip::Chip& chip, const std::string& name) {
  if (!chip.memory_system()) throw InputError("kernel " + name + " measures the memory system: use sim.memory_model=detailed");
}

}  // namespace

Sample hbm_stream_sample() {
  return Sample{
      "hbm_stream", "every vector core streams its share of a buffer GM -> UB (reads) and UB -> GM (writes)",
      "bytes (268435456): bytes moved in total over all cores\ncores (all vector cores): cores streaming\n"
      "pattern (seq): seq, stride or random\nstride (65536): bytes between accesses for pattern=stride\n"
      "access (16384): bytes per DataCopy\nread_ratio (100): percent of the bytes that are reads\n"
      "span (1073741824, or a quarter of hbm.capacity when less): bytes of address space that stride and random "
      "accesses "
      "range over",
      [](Params& p, hw::chip::Chip& chip) {
        require_detailed(chip, "hbm_stream");
        const std::uint32_t all = vector_core_count(chip.config());
        const std::uint64_t bytes = p.integer("bytes", 256ULL << 20, 4096, 1ULL << 36);
        const auto cores = static_cast<std::uint32_t>(p.integer("cores", all, 1, all));
        const std::string pattern = p.choice("pattern", "seq", {"seq", "stride", "random"});
        const std::uint64_t stride = p.integer("stride", 65536, 32, 1ULL << 32);
        const std::uint64_t access = p.integer("access", 16384, 32, chip.config().buffers.ub.size / 2);
        const std::uint64_t read_pct = p.integer("read_ratio", 100, 0, 100);
        // The default span fits any device: 1 GiB, or a quarter of the device memory when that is less.
        const std::uint64_t span =
            p.integer("span", std::min<std::uint64_t>(1ULL << 30, chip.config().hbm.capacity / 4), 4096,
                      chip.config().hbm.capacity / 2);
        if (access % 32 != 0) throw InputError("parameter 'access': must be a multiple of 32 B");
        const std::uint64_t per_core = bytes / cores / access * access;
        if (per_core == 0) {
          throw InputError("parameters 'bytes', 'cores' and 'access': " + std::to_string(bytes) + " B over " +
                           std::to_string(cores) + " cores is less than one access of " + std::to_string(access) +
                           " B a core (raise bytes, or lower cores or access)");
        }
        // Sequential streams read [0, bytes) and write [bytes, 2 bytes); stride and random accesses range over
        // `span` bytes (reads in the lower, writes in the upper half of the device's first 2 x span).
        const std::uint64_t region = pattern == "seq" ? per_core * cores : span;
        if (2 * region > chip.config().hbm.capacity) {
          throw InputError(std::string(pattern == "seq" ? "parameter 'bytes'" : "parameter 'span'") + ": twice " +
                           std::to_string(region) + " B (reads and writes apart) exceeds hbm.capacity");
        }
        SampleRun run;
        run.spec.name = "hbm_stream";
        run.spec.type = KernelType::kVector;
        run.spec.block_dim = cores;
        run.spec.body = [=] {
          TPipe pipe;
          TBuf<TPosition::VECCALC> in, out;
          pipe.InitBuffer(in, access);
          pipe.InitBuffer(out, access);
          const std::uint64_t n = per_core / access;
          const std::uint64_t reads = n * read_pct / 100;
          std::mt19937_64 rng(GetBlockIdx() + 1);
          auto address = [&](std::uint64_t i, std::uint64_t base) {
            if (pattern == "seq") return base + GetBlockIdx() * per_core + i * access;
            if (pattern == "stride") return base + (GetBlockIdx() * per_core + i * stride) % (region - access) / 32 * 32;
            return base + rng() % (region / access) * access;
          };
          GlobalTensor<std::uint8_t> g;
          // Reads and writes interleave in the ratio asked for; MTE2 and MTE3 run independently.
          for (std::uint64_t i = 0, r = 0, w = 0; i < n; ++i) {
            if (r * 100 <= i * read_pct && r < reads) {
              g.SetGlobalBuffer(address(r++, 0));
              DataCopy(in.Get<std::uint8_t>(), g, access);
            } else {
              g.SetGlobalBuffer(address(w++, region));
              DataCopy(g, out.Get<std::uint8_t>(), access);
            }
          }
        };
        run.gm_bytes = 2 * region;
        run.facts["bytes_moved"] = static_cast<double>(region);
        run.facts["peak_hbm_GBps"] = chip.config().hbm.peak_bytes_per_second() / 1e9;
        return run;
      }};
}

Sample l2_stream_sample() {
  return Sample{
      "l2_stream", "all vector cores read a working set again and again (L2 bandwidth when it fits)",
      "working_set (67108864): bytes\npasses (4): reads of the whole working set\ncores (all vector cores)\n"
      "access (16384): bytes per DataCopy",
      [](Params& p, hw::chip::Chip& chip) {
        require_detailed(chip, "l2_stream");
        const std::uint32_t all = vector_core_count(chip.config());
        const std::uint64_t ws = p.integer("working_set", 64ULL << 20, 4096, 1ULL << 36);
        const std::uint64_t passes = p.integer("passes", 4, 1, 1000);
        const auto cores = static_cast<std::uint32_t>(p.integer("cores", all, 1, all));
        const std::uint64_t access = p.integer("access", 16384, 32, chip.config().buffers.ub.size);
        const std::uint64_t per_core = ws / cores / access * access;
        if (per_core == 0) {
          throw InputError("parameters 'working_set', 'cores' and 'access': " + std::to_string(ws) + " B over " +
                           std::to_string(cores) + " cores is less than one access of " + std::to_string(access) +
                           " B a core (raise working_set, or lower cores or access)");
        }
        SampleRun run;
        run.spec.name = "l2_stream";
        run.spec.type = KernelType::kVector;
        run.spec.block_dim = cores;
        run.spec.body = [=] {
          TPipe pipe;
          TBuf<TPosition::VECCALC> in;
          pipe.InitBuffer(in, access);
          GlobalTensor<std::uint8_t> g;
          for (std::uint64_t pass = 0; pass < passes; ++pass) {
            for (std::uint64_t off = 0; off < per_core; off += access) {
              g.SetGlobalBuffer(GetBlockIdx() * per_core + off);
              DataCopy(in.Get<std::uint8_t>(), g, access);
            }
          }
        };
        run.gm_bytes = per_core * cores;
        run.facts["working_set_bytes"] = static_cast<double>(per_core * cores);
        run.facts["l2_bytes"] = static_cast<double>(chip.config().l2.capacity);
        return run;
      }};
}

Sample latency_probe_sample() {
  return Sample{
      "latency_probe", "one core issues dependent single reads (each waits for the last): unloaded latency",
      "target (hbm): hbm (each read to an idle bank) or l2 (lines already in the L2)\n"
      "reads (64): number of reads (hbm: at most one per set of idle banks)\nbytes (32): bytes per read",
      [](Params& p, hw::chip::Chip& chip) {
        require_detailed(chip, "latency_probe");
        const std::string target = p.choice("target", "hbm", {"hbm", "l2"});
        const std::uint64_t bytes = p.integer("bytes", 32, 32, 4096);
        if (bytes % 32 != 0) throw InputError("parameter 'bytes': must be a multiple of 32");
        const hw::mem::AddressMap map(chip.config().hbm);
        const std::uint64_t max_reads = map.pseudo_channels() * map.banks_per_pc();
        const std::uint64_t reads = p.integer("reads", 64, 1, 1ULL << 20);
        // HBM target: one read per bank, so every read opens a row in an idle bank. L2 target: lines placed in
        // the L2 beforehand.
        std::vector<std::uint64_t> addrs;
        if (target == "hbm") {
          // A read misses the L2 and fetches its whole line: take lines whose bursts all go to banks no earlier
          // line touched, so every fetch opens rows in idle banks.
          std::vector<bool> seen(max_reads, false);
          const std::uint64_t line = chip.config().l2.line_bytes, burst = chip.config().hbm.burst_bytes;
          std::vector<std::uint64_t> keys;
          for (std::uint64_t a = 0; addrs.size() < reads && a + line <= chip.config().hbm.capacity; a += line) {
            keys.clear();
            bool fresh = true;
            for (std::uint64_t b = a; b < a + line; b += burst) {
              const hw::mem::DramAddress d = map.decode(b);
              const std::uint64_t key = (static_cast<std::uint64_t>(d.pc) * chip.config().hbm.bank_groups + d.bg) *
                                            chip.config().hbm.banks_per_group + d.bank;
              if (seen[key]) fresh = false;
              keys.push_back(key);
            }
            if (!fresh) continue;
            for (std::uint64_t k : keys) seen[k] = true;
            addrs.push_back(a);
          }
        } else {
          for (std::uint64_t i = 0; i < reads; ++i) addrs.push_back(i * chip.config().l2.line_bytes);
          chip.memory_system()->preload(0, reads * chip.config().l2.line_bytes);
        }
        SampleRun run;
        run.spec.name = "latency_probe";
        run.spec.type = KernelType::kVector;
        run.spec.block_dim = 1;
        run.spec.body = [=] {
          TPipe pipe;
          TBuf<TPosition::VECCALC> buf;
          pipe.InitBuffer(buf, bytes);
          GlobalTensor<std::uint8_t> g;
          for (std::uint64_t a : addrs) {
            g.SetGlobalBuffer(a);
            DataCopy(buf.Get<std::uint8_t>(), g, bytes);
            // The scalar unit waits for the data before it issues the next read: the reads are dependent.
            SetFlag<HardEvent::MTE2_S>(0);
            WaitFlag<HardEvent::MTE2_S>(0);
          }
        };
        run.gm_bytes = addrs.empty() ? 0 : addrs.back() + bytes;
        run.facts["reads"] = static_cast<double>(addrs.size());
        return run;
      }};
}

}  // namespace npusim::fw::kernel::samples
