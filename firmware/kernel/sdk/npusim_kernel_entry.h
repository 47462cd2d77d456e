// How a kernel library built against the npusim SDK tells the simulator what it holds: a table of entry points,
// each with its parameter kinds and an invoker that calls the kernel with arguments given as 64-bit words. The
// table is made by a small generated file (NPUSIM_ENTRY for each kernel; `npusim kernel FILE.cpp` and the CMake
// function npusim_add_kernel() write it), because a C++ function's parameters cannot be read from its symbol.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace npusim_sdk {

// Bumped whenever the table or the kernel API's binary interface changes; the loader refuses other versions.
inline constexpr std::uint32_t kAbiVersion = 1;

enum class ArgKind : std::uint8_t { kPointer = 0, kSigned = 1, kUnsigned = 2, kFloat = 3 };

struct EntryInfo {
  const char* name;
  std::uint32_t argc;
  const ArgKind* kinds;        // argc kinds
  const std::uint8_t* sizes;   // argc sizes in bytes
  void (*invoke)(const std::uint64_t* words);
};

struct EntryTable {
  std::uint32_t abi;
  std::uint32_t count;
  const EntryInfo* entries;
};

template <class A>
constexpr ArgKind kind_of() {
  static_assert(std::is_pointer_v<A> || std::is_arithmetic_v<A>,
                "npusim SDK: a kernel parameter must be GM_ADDR (a pointer) or a scalar number");
  if constexpr (std::is_pointer_v<A>) return ArgKind::kPointer;
  else if constexpr (std::is_floating_point_v<A>) return ArgKind::kFloat;
  else if constexpr (std::is_signed_v<A>) return ArgKind::kSigned;
  else return ArgKind::kUnsigned;
}

// A word as a parameter of type A: a pointer's address, an integer's value, a floating value's double bits.
template <class A>
A from_word(std::uint64_t w) {
  if constexpr (std::is_pointer_v<A>) {
    return reinterpret_cast<A>(static_cast<std::uintptr_t>(w));
  } else if constexpr (std::is_floating_point_v<A>) {
    double d;
    std::memcpy(&d, &w, sizeof d);
    return static_cast<A>(d);
  } else {
    return static_cast<A>(w);
  }
}

template <auto F>
struct Entry;
template <class... A, void (*F)(A...)>
struct Entry<F> {
  static constexpr ArgKind kinds[sizeof...(A) + 1] = {kind_of<A>()..., ArgKind::kPointer};
  static constexpr std::uint8_t sizes[sizeof...(A) + 1] = {static_cast<std::uint8_t>(sizeof(A))..., 0};
  template <std::size_t... I>
  static void call(const std::uint64_t* w, std::index_sequence<I...>) {
    F(from_word<A>(w[I])...);
  }
  static void invoke(const std::uint64_t* w) { call(w, std::index_sequence_for<A...>{}); }
  static constexpr EntryInfo info(const char* name) {
    return EntryInfo{name, static_cast<std::uint32_t>(sizeof...(A)), kinds, sizes, &invoke};
  }
};

}  // namespace npusim_sdk

// The table, exported from the kernel library as npusim_sdk_entries():
//   NPUSIM_ENTRY_TABLE_BEGIN
//   NPUSIM_ENTRY(add_custom)
//   NPUSIM_ENTRY_TABLE_END
#define NPUSIM_ENTRY_TABLE_BEGIN                                                                          \
  extern "C" __attribute__((visibility("default"))) const ::npusim_sdk::EntryTable* npusim_sdk_entries() { \
    static const ::npusim_sdk::EntryInfo entries[] = {
#define NPUSIM_ENTRY(name) ::npusim_sdk::Entry<&name>::info(#name),
#define NPUSIM_ENTRY_TABLE_END                                                                              \
  }                                                                                                         \
  ;                                                                                                         \
  static const ::npusim_sdk::EntryTable table{::npusim_sdk::kAbiVersion,                                    \
                                              static_cast<std::uint32_t>(sizeof entries / sizeof entries[0]), \
                                              entries};                                                     \
  return &table;                                                                                            \
  }
