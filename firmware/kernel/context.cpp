#include "firmware/kernel/context.hpp"

#include <stdexcept>

namespace npusim::fw::kernel {

KernelContext& ctx() {
  hw::core::CoreEngine* e = hw::core::AiCore::current();
  if (!e || !e->user_context()) throw std::logic_error("kernel API called outside a running kernel");
  return *static_cast<KernelContext*>(e->user_context());
}

}  // namespace npusim::fw::kernel
