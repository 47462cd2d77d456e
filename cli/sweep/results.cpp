#include "cli/sweep/results.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/sweep/expr.hpp"
#include "common/util/error.hpp"
#include "traces/op_summary.hpp"

namespace npusim::cli::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

std::string run_key(const Point& p, const Workload& w) { return p.key() + "-" + w.hash; }

json make_row(const Spec& spec, const Point& p, const Workload& w, const std::string& status, const std::string& error,
              double wall_s) {
  json axes = json::object(), derived = json::object();
  for (const auto& [k, v] : p.axes) axes[k] = v;
  for (const auto& [k, v] : p.derived) derived[k] = v;
  json row = {{"sweep", spec.name},
              {"point", p.index},
              {"workload", w.name},
              {"status", status},
              {"config_hash", p.config_hash},
              {"workload_hash", w.hash},
              {"key", run_key(p, w)},
              {"axes", axes},
              {"derived", derived},
              {"metrics", json::object()},
              {"wall_s", wall_s}};
  // The axes' and derived keys' values as numbers in the key's base unit (bytes, Hz, B/s...), for plotting.
  json values = json::object();
  for (const auto& kv : p.axes)
    if (const auto it = p.config.find(kv.first); it != p.config.end()) values[kv.first] = it->second;
  for (const auto& kv : p.derived)
    if (const auto it = p.config.find(kv.first); it != p.config.end()) values[kv.first] = it->second;
  row["values"] = values;
  row["chip"] = p.chip;
  row["error"] = error.empty() ? json(nullptr) : json(error);
  return row;
}

namespace {

// A dotted path into a JSON value; numeric parts index arrays.
const json* at_path(const json& root, std::string_view path) {
  const json* cur = &root;
  while (!path.empty()) {
    const std::size_t dot = path.find('.');
    const std::string part(path.substr(0, dot));
    path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
    if (cur->is_object()) {
      const auto it = cur->find(part);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array() && !part.empty() && part.size() < 10 && part.find_first_not_of("0123456789") == std::string::npos) {
      const std::size_t i = std::stoul(part);
      if (i >= cur->size()) return nullptr;
      cur = &(*cur)[i];
    } else {
      return nullptr;
    }
  }
  return cur;
}

std::optional<double> number_of(const json* v) {
  if (!v) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  if (v->is_boolean()) return v->get<bool>() ? 1.0 : 0.0;
  return std::nullopt;
}

}  // namespace

void fill_metrics(json& row, const Spec& spec, const Point& p, const json& report) {
  const json& chip = p.chip;
  json metrics = json::object();
  for (const Metric& m : spec.metrics) {
    // A bare path keeps the report's value as it is (a number, a string, a list).
    if (m.name == m.expr) {
      if (const json* v = at_path(report, m.expr)) {
        metrics[m.name] = *v;
        continue;
      }
    }
    bool missing = false;
    const Lookup lookup = [&](std::string_view name) -> std::optional<double> {
      std::optional<double> v;
      if (name.rfind("config.", 0) == 0) {
        const auto it = p.config.find(std::string(name.substr(7)));
        if (it != p.config.end()) v = it->second;
      } else if (name.rfind("chip.", 0) == 0) {
        v = number_of(at_path(chip, name.substr(5)));
      } else {
        v = number_of(at_path(report, name));
      }
      if (!v) {
        missing = true;
        return 0.0;  // finish the evaluation; the metric is null
      }
      return v;
    };
    try {
      const double v = eval_expr(m.expr, lookup);
      metrics[m.name] = missing ? json(nullptr) : json(v);
    } catch (const InputError&) {
      // A division by zero or a non-finite value of this run's numbers: no value, like a missing key.
      metrics[m.name] = nullptr;
    }
  }
  row["metrics"] = std::move(metrics);
}

std::string row_text(const json& row) { return row.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string report_line(const std::string& key, const json& report) {
  return "{\"key\":" + row_text(json(key)) + ",\"report\":" + row_text(report) + "}";
}

std::vector<std::string> jsonl_files(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec))
    if (f.path().filename().string().rfind(prefix, 0) == 0 && f.path().extension() == ".jsonl") out.push_back(f.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> slurm_files(const std::string& out_dir, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& job : fs::directory_iterator(out_dir + "/slurm", ec)) {
    if (!job.is_directory()) continue;
    const std::vector<std::string> more = jsonl_files(job.path().string(), prefix);
    out.insert(out.end(), more.begin(), more.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void retire_slurm_parts(const std::string& out_dir) {
  std::error_code ec;
  for (const std::string& part : slurm_files(out_dir, "part-")) fs::rename(part, part + ".merged", ec);
}

ReportStore::ReportStore(const std::string& out_dir) {
  std::vector<std::string> files = {out_dir + "/reports.jsonl"};
  const std::vector<std::string> parts = slurm_files(out_dir, "reports-");
  files.insert(files.end(), parts.begin(), parts.end());
  const std::string prefix = "{\"key\":\"";
  for (const std::string& file : files) {
    std::ifstream f(file, std::ios::binary);
    std::string line;
    std::uint64_t offset = 0;
    while (std::getline(f, line)) {
      const std::uint64_t here = offset;
      offset += line.size() + 1;
      if (f.eof() || line.rfind(prefix, 0) != 0 || line.back() != '}') continue;  // torn or foreign
      const std::size_t end = line.find('"', prefix.size());
      if (end == std::string::npos) continue;
      index_[line.substr(prefix.size(), end - prefix.size())] = Where{file, here, line.size()};
    }
  }
}

std::optional<json> ReportStore::get(const std::string& key) const {
  const auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  std::ifstream f(it->second.file, std::ios::binary);
  std::string line(it->second.length, '\0');
  f.seekg(static_cast<std::streamoff>(it->second.offset));
  if (!f.read(line.data(), static_cast<std::streamsize>(line.size()))) return std::nullopt;
  try {
    json j = json::parse(line);
    if (!j.contains("report")) return std::nullopt;
    return std::move(j["report"]);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::vector<json> read_rows(const std::string& path) {
  std::vector<json> rows;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    try {
      json row = json::parse(line);
      if (row.is_object() && row.contains("key") && row.contains("status")) rows.push_back(std::move(row));
    } catch (const json::exception&) {
      // A line torn by a kill: that run is not finished and runs again.
    }
  }
  return rows;
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw InputError(path + ": cannot write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw InputError(path + ": cannot write (rename failed)");
}

namespace {

std::string csv_field(const json& v) {
  if (v.is_null()) return "";
  return traces::CsvWriter::quote(v.is_string() ? v.get<std::string>() : row_text(v));
}

}  // namespace

void write_csv(const std::string& path, const Spec& spec, const std::vector<json>& rows) {
  std::ostringstream out;
  std::vector<std::string> header = {"point", "workload", "status", "config_hash"};
  for (const auto& k : spec.axis_keys) header.push_back(k);
  for (const auto& k : spec.derived_keys) header.push_back(k);
  for (const auto& m : spec.metrics) header.push_back(m.name);
  header.push_back("wall_s");
  header.push_back("error");
  for (std::size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << csv_field(json(header[i]));
  out << "\n";
  for (const json& r : rows) {
    std::vector<json> f = {r["point"], r["workload"], r["status"], r["config_hash"]};
    for (const auto& k : spec.axis_keys) f.push_back(r["axes"].value(k, json(nullptr)));
    for (const auto& k : spec.derived_keys) f.push_back(r["derived"].value(k, json(nullptr)));
    for (const auto& m : spec.metrics) f.push_back(r["metrics"].value(m.name, json(nullptr)));
    f.push_back(r["wall_s"]);
    f.push_back(r["error"]);
    for (std::size_t i = 0; i < f.size(); ++i) out << (i ? "," : "") << csv_field(f[i]);
    out << "\n";
  }
  write_atomically(path, out.str());
}

}  // namespace npusim::cli::sweep
