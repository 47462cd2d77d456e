// gzip for traces: a stream buffer that compresses into another stream as it is written (zlib's deflate with a gzip
// header, which Perfetto's trace processor recognises by its first two bytes), and reading a file that may be
// gzip-compressed.
#pragma once

#include <zlib.h>

#include <istream>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

namespace npusim::traces {

class GzipStreambuf final : public std::streambuf {
 public:
  explicit GzipStreambuf(std::ostream& sink);
  ~GzipStreambuf() override;
  GzipStreambuf(const GzipStreambuf&) = delete;
  GzipStreambuf& operator=(const GzipStreambuf&) = delete;

  // Compresses what is left and writes the gzip trailer; false when zlib or the sink failed. Writes after it fail.
  bool finish();

 protected:
  int_type overflow(int_type ch) override;
  // Hands the buffered text to zlib (which keeps compressed data back until it has a block's worth, or finish()).
  int sync() override;

 private:
  bool deflate_input(int flush);

  std::ostream& sink_;
  z_stream z_{};
  std::vector<char> in_, out_;
  bool ok_ = true;
  bool finished_ = false;
};

// Reads a file through zlib: gzip-compressed files are decompressed as they are read, others read as they are.
class GzipFileReader final : public std::streambuf {
 public:
  // std::runtime_error naming the path when it cannot be opened.
  explicit GzipFileReader(const std::string& path);
  ~GzipFileReader() override;
  GzipFileReader(const GzipFileReader&) = delete;
  GzipFileReader& operator=(const GzipFileReader&) = delete;
  // zlib's message when reading stopped on bad or truncated data (or a read error), else empty.
  std::string error() const;
  // Whether the file is gzip-compressed (known once reading began).
  bool compressed() const { return file_ && gzdirect(file_) == 0; }

 protected:
  int_type underflow() override;

 private:
  gzFile file_ = nullptr;
  std::vector<char> buf_;
  std::string error_;
};

}  // namespace npusim::traces
