#include "cli/npy.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include "common/util/atomic_file.hpp"
#include "common/util/error.hpp"
#include "common/util/file.hpp"
#include "stack/ops/op.hpp"

namespace npusim::cli {

using hw::isa::DType;

NpyArray parse_npy(const std::string& s, const std::string& path) {
  if (s.size() < 10 || s.compare(0, 6, "\x93NUMPY") != 0) throw InputError(path + ": not a .npy file");
  const int major = static_cast<unsigned char>(s[6]);
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(s[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(s[9])) << 8);
    start = 10;
  } else if (s.size() >= 12) {
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(s[8 + i])) << (8 * i);
    start = 12;
  }
  if (start == 0 || s.size() < start + header_len) throw InputError(path + ": truncated .npy header");
  const std::string h = s.substr(start, header_len);
  NpyArray a;
  auto field = [&](const std::string& key) {
    const auto k = h.find("'" + key + "'");
    if (k == std::string::npos) throw InputError(path + ": .npy header has no '" + key + "'");
    return h.substr(h.find(':', k) + 1);
  };
  const std::string descr = field("descr");
  if (descr.find("'<f4'") != std::string::npos) a.dtype = DType::kFp32;
  else if (descr.find("'<f2'") != std::string::npos) a.dtype = DType::kFp16;
  else if (descr.find("'<u2'") != std::string::npos) a.dtype = DType::kBf16;
  else if (descr.find("'<i4'") != std::string::npos) a.dtype = DType::kInt32;
  else if (descr.find("'|i1'") != std::string::npos) a.dtype = DType::kInt8;
  else if (descr.find("'<i8'") != std::string::npos)
    a.file_type = stack::graph::ElemType::kInt64;
  else if (descr.find("'<f8'") != std::string::npos)
    a.file_type = stack::graph::ElemType::kFloat64;
  else if (descr.find("'<i2'") != std::string::npos)
    a.file_type = stack::graph::ElemType::kInt16;
  else if (descr.find("'|u1'") != std::string::npos)
    a.file_type = stack::graph::ElemType::kUint8;
  else if (descr.find("'<u4'") != std::string::npos)
    a.file_type = stack::graph::ElemType::kUint32;
  else if (descr.find("'<u8'") != std::string::npos)
    a.file_type = stack::graph::ElemType::kUint64;
  else if (descr.find("'|b1'") != std::string::npos)
    a.file_type = stack::graph::ElemType::kBool;
  else
    throw InputError(
        path + ": element type " + descr.substr(0, descr.find(',')) +
        " is not float32, float16, uint16 (bfloat16 bits), float64, int8 to int64, uint8, uint32, uint64 or bool");
  if (a.file_type != stack::graph::ElemType::kUndefined) a.dtype = *stack::graph::storage_dtype(a.file_type);
  if (field("fortran_order").find("True") < field("fortran_order").find(',')) throw InputError(path + ": Fortran order is not supported");
  const std::string shape = field("shape");
  const auto open = shape.find('('), close = shape.find(')');
  std::stringstream dims(shape.substr(open + 1, close - open - 1));
  if (open == std::string::npos || close == std::string::npos || close < open) {
    throw InputError(path + ": .npy header's shape is not a tuple");
  }
  std::uint64_t n = 1;
  for (std::string d; std::getline(dims, d, ',');) {
    const auto b = d.find_first_not_of(' '), e = d.find_last_not_of(' ');
    if (b == std::string::npos) continue;
    const std::string digits = d.substr(b, e - b + 1);
    // At most 2^53 elements in all (stack::ops::kMaxElements): sizes in bytes never wrap.
    if (digits.empty() || digits.size() > 16 || digits.find_first_not_of("0123456789") != std::string::npos) {
      throw InputError(std::string(path).append(": .npy shape entry '").append(digits).append("' is not a size"));
    }
    a.shape.push_back(std::stoull(digits));
    if (a.shape.back() != 0 && n > stack::ops::kMaxElements / a.shape.back()) {
      throw InputError(path + ": .npy shape has more than 2^53 elements");
    }
    n *= a.shape.back();
  }
  const std::uint64_t bytes =
      n * (a.file_type != stack::graph::ElemType::kUndefined ? stack::graph::elem_bytes(a.file_type)
                                                             : hw::isa::dtype_bytes(a.dtype));
  if (s.size() - start - header_len != bytes)
    throw InputError(path + ": " + std::to_string(s.size() - start - header_len) + " data bytes for shape of " + std::to_string(n) + " elements");
  a.bytes.assign(s.begin() + static_cast<std::ptrdiff_t>(start + header_len), s.end());
  return a;
}

NpyArray read_npy(const std::string& path) {
  return parse_npy(read_file(path), path);
}

void write_npy(const std::string& path, const NpyArray& a) {
  std::string shape = "(";
  for (std::size_t i = 0; i < a.shape.size(); ++i) shape += std::to_string(a.shape[i]) + (a.shape.size() == 1 || i + 1 < a.shape.size() ? "," : "");
  shape += ")";
  using stack::graph::ElemType;
  const char* descr = a.file_type == ElemType::kInt64     ? "<i8"
                      : a.file_type == ElemType::kFloat64 ? "<f8"
                      : a.file_type == ElemType::kBool    ? "|b1"
                      : a.file_type == ElemType::kInt16   ? "<i2"
                      : a.file_type == ElemType::kUint8   ? "|u1"
                      : a.file_type == ElemType::kUint32  ? "<u4"
                      : a.file_type == ElemType::kUint64  ? "<u8"
                      : a.file_type == ElemType::kInt8    ? "|i1"
                      : a.dtype == DType::kFp32           ? "<f4"
                      : a.dtype == DType::kFp16           ? "<f2"
                      : a.dtype == DType::kInt32          ? "<i4"
                      : a.dtype == DType::kInt8           ? "|i1"
                                                          : "<u2";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  AtomicFile file(path);
  std::ostream& f = file.stream();
  const std::uint16_t len = static_cast<std::uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.put(static_cast<char>(len & 0xff));
  f.put(static_cast<char>(len >> 8));
  f << header;
  f.write(reinterpret_cast<const char*>(a.bytes.data()), static_cast<std::streamsize>(a.bytes.size()));
  file.commit();
}

}  // namespace npusim::cli
