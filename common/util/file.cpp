#include "common/util/file.hpp"

#include <algorithm>
#include <fstream>

#include "common/util/error.hpp"

namespace npusim {
namespace {

// Read in chunks, not at once at the announced size: a pipe has none, and a file may grow while it is read.
constexpr std::size_t kChunk = std::size_t{1} << 20;

}  // namespace

ReadStatus read_bounded(const std::filesystem::path& path, std::size_t max_bytes, std::string& out) {
  namespace fs = std::filesystem;
  out.clear();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st) || fs::is_character_file(st) || fs::is_block_file(st)) return ReadStatus::kNotAFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) return ReadStatus::kCannotOpen;
  if (fs::is_regular_file(st)) {
    const std::uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > max_bytes) return ReadStatus::kTooLarge;
    if (!ec) out.reserve(static_cast<std::size_t>(size));
  }
  std::string chunk(kChunk, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(std::min(kChunk, max_bytes - out.size() + 1)));
    out.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (out.size() > max_bytes) {
      out.clear();
      out.shrink_to_fit();
      return ReadStatus::kTooLarge;
    }
  }
  return in.bad() ? ReadStatus::kCannotOpen : ReadStatus::kOk;  // a read error is not a short file
}

std::string read_file(const std::string& path, const std::string& what, std::size_t max_bytes) {
  std::string out;
  switch (read_bounded(path, max_bytes, out)) {
    case ReadStatus::kOk: return out;
    case ReadStatus::kNotAFile: throw InputError(path + ": is a directory or a device, not a file");
    case ReadStatus::kCannotOpen: throw InputError(path + ": " + what);
    case ReadStatus::kTooLarge:
      throw InputError(path + ": is larger than " + std::to_string(max_bytes) +
                       " bytes, the most an input file may have");
  }
  throw InputError(path + ": " + what);
}

void check_output_dir(const std::string& option, const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw InputError(option + " " + path + ": the directory '" + dir.string() + "' does not exist");
}

}  // namespace npusim
