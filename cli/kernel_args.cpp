#include "cli/kernel_args.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/npy.hpp"
#include "common/util/error.hpp"
#include "common/util/file.hpp"
#include "common/util/strings.hpp"
#include "stack/ops/op.hpp"

namespace npusim::cli {

using hw::isa::DType;

namespace {

DType parse_arg_dtype(const std::string& t, const std::string& where) {
  if (t == "fp16" || t == "float16" || t == "half") return DType::kFp16;
  if (t == "bf16" || t == "bfloat16") return DType::kBf16;
  if (t == "fp32" || t == "float32" || t == "float") return DType::kFp32;
  if (t == "int32") return DType::kInt32;
  if (t == "int8") return DType::kInt8;
  throw InputError(where + ": dtype '" + t + "' is not one of fp16, bf16, fp32, int32, int8");
}

}  // namespace

KernelArg parse_kernel_arg(const std::string& text, std::size_t index) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError("--arg '" + text +
                     "': expected NAME=SPEC (e.g. x=in.npy, x=random:fp16:1x1024, z=out:fp16:1x1024)");
  }
  KernelArg a;
  a.name = text.substr(0, eq);
  a.spec = text.substr(eq + 1);
  const std::string where = "--arg " + a.name + " (argument " + std::to_string(index) + ")";
  std::vector<std::string> parts;
  std::stringstream ss(a.spec);
  for (std::string p; std::getline(ss, p, ':');) parts.push_back(p);
  if (a.spec == "tiling") {
    a.kind = KernelArg::kTiling;
    return a;
  }
  if (!parts.empty() && (parts[0] == "random" || parts[0] == "zeros" || parts[0] == "out")) {
    if (parts.size() != 3)
      throw InputError(where + ": '" + a.spec + "' must be " + parts[0] + ":DTYPE:SHAPE, e.g. " + parts[0] +
                       ":fp16:8x2048");
    a.kind = parts[0] == "random" ? KernelArg::kRandom : parts[0] == "zeros" ? KernelArg::kZeros : KernelArg::kOutput;
    a.dtype = parse_arg_dtype(parts[1], where);
    try {
      a.shape = stack::ops::parse_shape(parts[2]);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    a.bytes = stack::ops::elements(a.shape) * hw::isa::dtype_bytes(a.dtype);
    return a;
  }
  // A number is a scalar parameter's value; anything else names a .npy file.
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(a.spec.c_str(), &end);
  if (!a.spec.empty() && end && *end == '\0' && errno == 0) {
    a.kind = KernelArg::kScalar;
    std::memcpy(&a.word, &v, sizeof v);  // refined to the parameter's kind when bound
    return a;
  }
  if (!ends_with(a.spec, ".npy")) {
    throw InputError(where + ": '" + a.spec +
                     "' is not a .npy file, random:/zeros:/out:DTYPE:SHAPE, tiling or a number");
  }
  const NpyArray arr = read_npy(a.spec);
  if (arr.file_type != stack::graph::ElemType::kUndefined)
    throw InputError(where + ": '" + a.spec + "' holds " + std::string(stack::graph::elem_name(arr.file_type)) +
                     " values; kernel arguments are fp16, bf16, fp32, int32 or int8 arrays");
  a.kind = KernelArg::kInput;
  a.dtype = arr.dtype;
  a.shape = arr.shape;
  a.data = arr.bytes;
  a.bytes = arr.bytes.size();
  return a;
}

namespace {

// --- Tiling struct ------------------------------------------------------------------------------------------------

struct Field {
  std::string name, type;
  std::uint32_t size = 0, count = 1, offset = 0;
};

std::uint32_t field_size(const std::string& t, const std::string& where) {
  static const std::map<std::string, std::uint32_t> sizes = {
      {"uint8", 1}, {"int8", 1},  {"uint16", 2},  {"int16", 2},  {"uint32", 4},  {"int32", 4}, {"uint64", 8},
      {"int64", 8}, {"float", 4}, {"float32", 4}, {"double", 8}, {"float64", 8}, {"bool", 1}};
  std::string base = t;
  if (ends_with(base, "_t")) base = base.substr(0, base.size() - 2);
  const auto it = sizes.find(base);
  if (it == sizes.end()) {
    throw InputError(where + ": type '" + t + "' is not one of (u)int8/16/32/64(_t), float, double, bool");
  }
  return it->second;
}

// The schema: {"fields": [{"name": "totalLength", "type": "uint32_t"}, {"name": "shape", "type": "int64", "count":
// 4}]}; offsets by natural alignment, as the C compiler lays out a struct of these members.
std::vector<Field> parse_schema(const std::string& text, const std::string& path, std::uint32_t& struct_size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("fields") || !j["fields"].is_array() || j["fields"].empty()) {
    throw InputError(path + ": a tiling schema is {\"fields\": [{\"name\": ..., \"type\": ...}, ...]}");
  }
  std::vector<Field> fields;
  std::uint32_t offset = 0, align = 1;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < j["fields"].size(); ++i) {
    const nlohmann::json& f = j["fields"][i];
    const std::string where = path + ": fields[" + std::to_string(i) + "]";
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("type") ||
        !f["type"].is_string()) {
      throw InputError(where + ": needs a string \"name\" and \"type\"");
    }
    Field fd;
    fd.name = f["name"].get<std::string>();
    fd.type = f["type"].get<std::string>();
    if (!seen.insert(fd.name).second) throw InputError(where + ": field '" + fd.name + "' appears twice");
    fd.size = field_size(fd.type, where);
    if (f.contains("count")) {
      if (!f["count"].is_number_unsigned() || f["count"].get<std::uint64_t>() == 0 ||
          f["count"].get<std::uint64_t>() > 4096) {
        throw InputError(where + ": \"count\" must be an integer 1..4096");
      }
      fd.count = f["count"].get<std::uint32_t>();
    }
    offset = (offset + fd.size - 1) / fd.size * fd.size;
    fd.offset = offset;
    offset += fd.size * fd.count;
    align = std::max(align, fd.size);
    fields.push_back(fd);
  }
  struct_size = (offset + align - 1) / align * align;
  return fields;
}

void store_field(std::vector<std::uint8_t>& out, const Field& f, std::uint32_t i, const nlohmann::json& v,
                 const std::string& where) {
  std::uint8_t* p = out.data() + f.offset + i * f.size;
  const bool is_float = f.type.rfind("float", 0) == 0 || f.type == "double";
  if (!v.is_number() && !v.is_boolean()) throw InputError(where + ": field '" + f.name + "' needs a number");
  if (is_float) {
    const double d = v.get<double>();
    if (f.size == 4) {
      const float x = static_cast<float>(d);
      std::memcpy(p, &x, 4);
    } else {
      std::memcpy(p, &d, 8);
    }
    return;
  }
  if (v.is_number_float() && std::floor(v.get<double>()) != v.get<double>()) {
    throw InputError(where + ": field '" + f.name + "' (" + f.type + ") needs an integer, got " + v.dump());
  }
  const bool is_signed = f.type[0] == 'i';
  const long double x = v.is_boolean() ? (v.get<bool>() ? 1 : 0) : v.get<long double>();
  const long double lo = is_signed ? -std::ldexp(1.0L, static_cast<int>(8 * f.size - 1)) : 0;
  const long double hi = is_signed ? std::ldexp(1.0L, static_cast<int>(8 * f.size - 1)) - 1
                                   : std::ldexp(1.0L, static_cast<int>(8 * f.size)) - 1;
  if (x < lo || x > hi)
    throw InputError(where + ": field '" + f.name + "' (" + f.type + "): " + v.dump() + " is out of range");
  const std::uint64_t u =
      is_signed ? static_cast<std::uint64_t>(static_cast<std::int64_t>(x)) : static_cast<std::uint64_t>(x);
  std::memcpy(p, &u, f.size);  // little-endian: the low bytes
}

}  // namespace

std::vector<std::uint8_t> tiling_bytes(const std::string& schema_path, const std::string& values) {
  if (schema_path.empty()) throw InputError("--tiling needs --tiling-schema FILE.json describing the struct's fields");
  const bool file = ends_with(values, ".json");
  return tiling_bytes_from(read_file(schema_path), schema_path, file ? read_file(values) : values, file ? values : "");
}

std::vector<std::uint8_t> tiling_bytes_from(const std::string& schema_json, const std::string& schema_path,
                                            const std::string& values, const std::string& values_file) {
  std::uint32_t size = 0;
  const std::vector<Field> fields = parse_schema(schema_json, schema_path, size);
  nlohmann::json vals = nlohmann::json::object();
  std::string where = "--tiling";
  if (!values_file.empty()) {
    where = values_file;
    try {
      vals = nlohmann::json::parse(values);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(values_file + ": not JSON: " + e.what());
    }
    if (!vals.is_object()) throw InputError(values_file + ": tiling values are an object {\"field\": value, ...}");
  } else {
    const auto not_a_number = [](const std::string& k, const std::string& v) {
      return InputError("--tiling: field '" + k + "': '" + v + "' is not a number");
    };
    std::stringstream ss(values);
    for (std::string kv; std::getline(ss, kv, ',');) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw InputError("--tiling: '" + kv + "' is not FIELD=VALUE");
      const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
      if (vals.contains(k)) throw InputError("--tiling: field '" + k + "' is given twice");
      try {
        vals[k] = nlohmann::json::parse(v);
      } catch (const nlohmann::json::exception&) {
        throw not_a_number(k, v);
      }
    }
  }
  // Errors name the values' origin, the field and the schema.
  const auto error = [&](const std::string& what, const std::string& field, const std::string& then) {
    return InputError(where + ": " + what + "'" + field + "'" + then + " (" + schema_path + ")");
  };
  std::vector<std::uint8_t> out(size, 0);
  std::set<std::string> known;
  for (const Field& f : fields) {
    known.insert(f.name);
    if (!vals.contains(f.name)) throw error("no value for tiling field ", f.name, "");
    const nlohmann::json& v = vals[f.name];
    if (f.count > 1) {
      if (!v.is_array() || v.size() != f.count) {
        throw InputError(where + ": field '" + f.name + "' needs " + std::to_string(f.count) +
                         " values, as a JSON array");
      }
      for (std::uint32_t i = 0; i < f.count; ++i) store_field(out, f, i, v[i], where);
    } else {
      store_field(out, f, 0, v, where);
    }
  }
  for (auto& [k, v] : vals.items()) {
    if (!known.count(k)) throw error("", k, " is not a field of the tiling struct");
  }
  return out;
}

}  // namespace npusim::cli
