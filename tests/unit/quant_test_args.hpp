#pragma once
// Quantizer call arguments for host-side tests: aligned stand-ins for device pointers, which
// GroupQuant::check only looks at the addresses of.
#include <cstdint>

#include "kiln/ops/group_quant.hpp"

namespace kiln::test {

inline void* address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

inline ops::QuantArgs args_for(std::uint64_t m, std::uint64_t k) {
  ops::QuantArgs args;
  args.x = address(0x10000);
  args.q = address(0x20000);
  args.scales = address(0x30000);
  args.m = m;
  args.k = k;
  return args;
}

}  // namespace kiln::test
