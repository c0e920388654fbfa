#include "kiln/ops/quant_launch_options.hpp"

#include "base/config.hpp"

namespace kiln::ops {

bool pdl_lever() {
  // Why off by default: PDL lets a kiln kernel overlap the kernel before it, which is only a gain
  // when launches are back to back; the caller or the operator opts in.
  static const bool enabled = process_config().pdl;
  return enabled;
}

}  // namespace kiln::ops
