#include "traces/gzip_stream.hpp"

#include <stdexcept>

namespace npusim::traces {
namespace {

constexpr std::size_t kBuffer = std::size_t{1} << 16;
constexpr int kGzipWindow = 15 + 16;  // deflateInit2: the largest window, with a gzip header and trailer

}  // namespace

GzipStreambuf::GzipStreambuf(std::ostream& sink) : sink_(sink), in_(kBuffer), out_(kBuffer) {
  if (deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib could not start a gzip stream");
  setp(in_.data(), in_.data() + in_.size());
}

GzipStreambuf::~GzipStreambuf() {
  deflateEnd(&z_);
}

bool GzipStreambuf::deflate_input(int flush) {
  z_.next_in = reinterpret_cast<Bytef*>(pbase());
  z_.avail_in = static_cast<uInt>(pptr() - pbase());
  int rc = Z_OK;
  do {
    z_.next_out = reinterpret_cast<Bytef*>(out_.data());
    z_.avail_out = static_cast<uInt>(out_.size());
    rc = deflate(&z_, flush);
    if (rc == Z_STREAM_ERROR) return ok_ = false;
    sink_.write(out_.data(), static_cast<std::streamsize>(out_.size() - z_.avail_out));
    if (!sink_) return ok_ = false;
  } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  setp(in_.data(), in_.data() + in_.size());
  return ok_;
}

GzipStreambuf::int_type GzipStreambuf::overflow(int_type ch) {
  if (finished_ || !deflate_input(Z_NO_FLUSH)) return traits_type::eof();
  if (!traits_type::eq_int_type(ch, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(ch);
    pbump(1);
  }
  return traits_type::not_eof(ch);
}

int GzipStreambuf::sync() {
  return finished_ || deflate_input(Z_NO_FLUSH) ? 0 : -1;
}

bool GzipStreambuf::finish() {
  if (finished_) return ok_;
  finished_ = true;
  const bool done = deflate_input(Z_FINISH);
  setp(nullptr, nullptr);  // later writes overflow, which fails
  return done && sink_.flush().good();
}

GzipFileReader::GzipFileReader(const std::string& path) : buf_(kBuffer) {
  file_ = gzopen(path.c_str(), "rb");
  if (!file_) throw std::runtime_error("cannot open " + path);
  gzbuffer(file_, static_cast<unsigned>(kBuffer));
}

GzipFileReader::~GzipFileReader() {
  if (file_) gzclose(file_);
}

std::string GzipFileReader::error() const {
  return error_;
}

GzipFileReader::int_type GzipFileReader::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  const int n = gzread(file_, buf_.data(), static_cast<unsigned>(buf_.size()));
  if (n <= 0) {
    int code = Z_OK;
    const char* msg = gzerror(file_, &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) error_ = msg ? msg : "read error";
    return traits_type::eof();
  }
  setg(buf_.data(), buf_.data(), buf_.data() + n);
  return traits_type::to_int_type(*gptr());
}

}  // namespace npusim::traces
