#include "cli/info_command.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

namespace npusim::cli {

using config::Unit;
using config::format_value;
using nlohmann::json;

json device_facts(const config::LoadedConfig& loaded) {
  const config::ChipConfig& c = loaded.chip;
  json cores = json::object();
  if (c.split()) {
    cores["aic"] = c.cores.aic;
    cores["aiv"] = c.cores.aiv;
  } else {
    cores["ai_core"] = c.cores.ai_cores;
    cores["vector_core"] = c.cores.vector_cores;
  }
  const auto& b = c.buffers;
  json buffers = {{"l1_bytes", b.l1.size},   {"l0a_bytes", b.l0a.size}, {"l0b_bytes", b.l0b.size},
                  {"l0c_bytes", b.l0c.size}, {"ub_bytes", b.ub.size},   {"bias_table_bytes", b.bias_table.size},
                  {"fixpipe_buffer_bytes", b.fixpipe_buffer.size}};
  const double hbm_bps = c.hbm.peak_bytes_per_second();
  // A config that extends another without its own description inherits the parent's, whose numbers may no longer
  // hold: the keys set after it are listed (`changed`), and the text report says whose description it is.
  const auto desc = loaded.origins.find("description");
  json changed = json::array();
  if (desc != loaded.origins.end())
    for (const auto& [key, origin] : loaded.origins)
      if (key != "name" && origin.rank() > desc->second.rank()) changed.push_back(key);
  return json{
      {"description_from", desc != loaded.origins.end() ? desc->second.describe() : ""},
      {"changed_since_description", changed},
      {"name", c.name},
      {"description", c.description},
      {"source", loaded.source},
      {"organisation", c.cores.organisation},
      {"cores", cores},
      {"aiv_per_aic", c.split() ? c.cores.aiv_per_aic : 0},
      {"clock_GHz", c.clock.core_hz / 1e9},
      {"peak_fp16_tflops", c.peak_ops(c.cube.fp16) / 1e12},
      {"peak_bf16_tflops", c.peak_ops(c.cube.bf16) / 1e12},
      {"peak_fp32_tflops", c.peak_ops(c.cube.fp32) / 1e12},
      {"peak_int8_tops", c.peak_ops(c.cube.int8) / 1e12},
      {"peak_hbm_GBps", hbm_bps / 1e9},
      {"buffers", buffers},
      {"l2_bytes", c.l2.capacity},
      {"l2_slices", c.l2.slices},
      {"l2_line_bytes", c.l2.line_bytes},
      {"hbm_kind", c.hbm.kind},
      {"hbm_bytes", c.hbm.capacity},
      {"hbm_stacks", c.hbm.stacks},
      {"hbm_pseudo_channels", c.hbm.pseudo_channel_count()},
  };
}

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string bytes(const json& v) { return format_value(v.get<double>(), Unit::kBytes); }

}  // namespace

std::string format_device_facts(const json& f) {
  std::vector<std::pair<std::string, std::string>> rows;
  const json& cores = f["cores"];
  if (f["organisation"] == "split") {
    rows.emplace_back("Organisation", "split, groups of 1 AIC + " + f["aiv_per_aic"].dump() + " AIV");
    rows.emplace_back("AI Cube cores (AIC)", cores["aic"].dump());
    rows.emplace_back("AI Vector cores (AIV)", cores["aiv"].dump());
  } else {
    rows.emplace_back("Organisation", "coupled (Cube + Vector in each core)");
    rows.emplace_back("AI cores", cores["ai_core"].dump());
    if (cores["vector_core"].get<int>() > 0) rows.emplace_back("Vector cores", cores["vector_core"].dump());
  }
  rows.emplace_back("Clock", fixed(f["clock_GHz"].get<double>(), 3) + " GHz");
  const json& b = f["buffers"];
  std::string cube_bufs = "L1 " + bytes(b["l1_bytes"]) + ", L0A " + bytes(b["l0a_bytes"]) + ", L0B " +
                          bytes(b["l0b_bytes"]) + ", L0C " + bytes(b["l0c_bytes"]);
  rows.emplace_back("Cube buffers per core", cube_bufs);
  rows.emplace_back("Unified Buffer per core", bytes(b["ub_bytes"]));
  rows.emplace_back("L2 cache", bytes(f["l2_bytes"]) + " in " + f["l2_slices"].dump() + " slices, " +
                                    bytes(f["l2_line_bytes"]) + " lines");
  rows.emplace_back("Device memory", bytes(f["hbm_bytes"]) + " " + f["hbm_kind"].get<std::string>() + ", " +
                                         f["hbm_pseudo_channels"].dump() + " channels");
  rows.emplace_back("Peak fp16 / bf16", fixed(f["peak_fp16_tflops"].get<double>(), 1) + " / " +
                                            fixed(f["peak_bf16_tflops"].get<double>(), 1) + " TFLOPS");
  rows.emplace_back("Peak fp32", fixed(f["peak_fp32_tflops"].get<double>(), 1) + " TFLOPS");
  rows.emplace_back("Peak int8", fixed(f["peak_int8_tops"].get<double>(), 1) + " TOPS");
  rows.emplace_back("Peak memory bandwidth", fixed(f["peak_hbm_GBps"].get<double>(), 1) + " GB/s");

  std::size_t left = 0;
  std::size_t right = 0;
  for (const auto& [k, v] : rows) {
    left = std::max(left, k.size());
    right = std::max(right, v.size());
  }
  const std::string title = "npusim info  " + f["name"].get<std::string>();
  const std::string desc = f["description"].get<std::string>();
  right = std::max({right, title.size() > left + 3 ? title.size() - left - 3 : 0,
                    desc.size() > left + 3 ? desc.size() - left - 3 : 0});
  const std::size_t inner = left + right + 3;
  auto pad = [](const std::string& s, std::size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  const std::string rule = "+" + std::string(left + 2, '-') + "+" + std::string(right + 2, '-') + "+\n";
  const std::string full_rule = "+" + std::string(inner + 2, '-') + "+\n";

  std::ostringstream out;
  out << full_rule << "| " << pad(title, inner) << " |\n";
  if (!desc.empty()) out << "| " << pad(desc, inner) << " |\n";
  if (f.contains("changed_since_description") && !f["changed_since_description"].empty()) {
    // Wrapped to the box: whose description it is, and what this config changed over it.
    std::string note = "(the description of " + f["description_from"].get<std::string>() + "; changed since:";
    for (const auto& k : f["changed_since_description"]) note += " " + k.get<std::string>();
    note += ")";
    std::istringstream words(note);
    std::string line;
    for (std::string w; words >> w;) {
      if (!line.empty() && line.size() + 1 + w.size() > inner) {
        out << "| " << pad(line, inner) << " |\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + w;
    }
    if (!line.empty()) out << "| " << pad(line, inner) << " |\n";
  }
  out << rule;
  for (const auto& [k, v] : rows) out << "| " << pad(k, left) << " | " << pad(v, right) << " |\n";
  out << rule;
  return out.str();
}

}  // namespace npusim::cli
