// Functional semantics of the AI-core instructions: what each one does to the bytes of its buffers. Used in
// functional mode when the instruction executes in its pipe; timing-only mode never calls these.
//
// Layouts (documented in docs/hw.md, "Data layouts"):
// - ND: row-major.
// - NZ (L1, and FixPipe's L1 output): fractals of 16 rows x c0 elements (c0 = 32 B / element size), row-major inside;
//   fractals column-major across the matrix. Element (r, c) of a matrix with R rows per column block is at element
//   index ((c / c0) * R + r) * c0 + c % c0.
// - L0A: A (m x k) as fractals of 16 rows x k0 elements, row-major inside, fractal (fm, fk) at index fm * K1 + fk.
// - L0B: B (k x n) as fractals of 16 n-columns x k0 k-rows stored as B^T (row i = column n), fractal (fk, fn) at
//   index fk * N1 + fn.
// - L0C: C (m x n, fp32 or int32) as 16x16 fractals, row-major inside, fractal (fm, fn) at index fn * M1 + fm.
#pragma once

#include <cstdint>

#include "hw/isa/instr.hpp"

namespace npusim::hw::isa {

// The memory an instruction sees. Local buffers are contiguous arrays; device memory is read and written by range.
class MemoryView {
 public:
  virtual ~MemoryView() = default;
  // A pointer to `bytes` bytes at `addr` of a local buffer (the caller has checked the range).
  virtual std::uint8_t* local(Space s, std::uint64_t addr, std::uint64_t bytes) = 0;
  virtual void gm_read(std::uint64_t addr, void* out, std::uint64_t bytes) = 0;
  virtual void gm_write(std::uint64_t addr, const void* in, std::uint64_t bytes) = 0;
};

// Executes the data effect of `in`. Synchronisation and scalar instructions have none.
// Throws InputError for operand combinations the hardware does not support (e.g. a transpose of int8 fractals).
void execute(const Instr& in, MemoryView& mem);

// The buffer ranges an instruction touches (at most four), for range and alignment checks before it is queued.
struct AccessList {
  Access items[4];
  int count = 0;
  void add(Space s, std::uint64_t addr, std::uint64_t bytes, bool write, std::string_view operand) {
    items[count++] = Access{s, addr, bytes, write, operand};
  }
  const Access* begin() const { return items; }
  const Access* end() const { return items + count; }
};
AccessList accesses(const Instr& in);

// Element index helpers for the layouts above (also used by tests and kernels' host code).
inline std::uint64_t nz_index(std::uint64_t r, std::uint64_t c, std::uint64_t rows_per_block, std::uint64_t c0) {
  return ((c / c0) * rows_per_block + r) * c0 + c % c0;
}
inline std::uint64_t l0c_index(std::uint64_t r, std::uint64_t c, std::uint64_t m1) {
  return ((c / 16) * m1 + r / 16) * 256 + (r % 16) * 16 + c % 16;
}

}  // namespace npusim::hw::isa
