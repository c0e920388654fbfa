#include "driver/kernel_launch.hpp"

namespace kiln::driver {

CUresult launch_kernel(const DriverApi& api, CUfunction function, Dim3 grid, Dim3 block, std::uint32_t shared_bytes,
                       CUstream stream, void** args, bool dependent) {
  if (!dependent)
    return api.cuLaunchKernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream, args,
                              nullptr);
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attribute.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = grid.x;
  config.gridDimY = grid.y;
  config.gridDimZ = grid.z;
  config.blockDimX = block.x;
  config.blockDimY = block.y;
  config.blockDimZ = block.z;
  config.sharedMemBytes = shared_bytes;
  config.hStream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return api.cuLaunchKernelEx(&config, function, args, nullptr);
}

}  // namespace kiln::driver
