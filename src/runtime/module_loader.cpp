#include "runtime/module_loader.hpp"

#include <algorithm>
#include <array>

#include "base/log.hpp"
#include "driver/driver_check.hpp"
#include "driver/primary_context.hpp"
#include "kiln/error.hpp"

namespace kiln::driver {

namespace {

// Results that say the image itself is bad, so evicting it from disk and compiling again can help.
bool is_bad_image(CUresult result) {
  switch (result) {
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_SOURCE:
      return true;
    default:
      return false;
  }
}

// Why the thrower decides: only it knows whether the failure recurs (docs/embedding.md, "Errors");
// anything that is not a kiln::Error (a provider's own exception) may pass next time.
bool is_permanent(const std::exception& error) {
  const auto* kiln_error = dynamic_cast<const Error*>(&error);
  return kiln_error != nullptr && kiln_error->permanent();
}

std::string describe(const std::exception& error) {
  std::string text = error.what();
  if (const auto* kiln_error = dynamic_cast<const Error*>(&error); kiln_error && !kiln_error->context().log.empty())
    text += "\nNVRTC log:\n" + kiln_error->context().log;
  return text;
}

}  // namespace

LoadedModule::LoadedModule(const PrimaryContext& context, std::string name, CUmodule module)
    : context_(context), name_(std::move(name)), module_(module) {}

LoadedModule::~LoadedModule() {
  try {
    ScopedCurrent current(context_);
    check(context_.api(), context_.api().cuModuleUnload(module_), "cuModuleUnload");
  } catch (const std::exception& error) {
    logger().warn("device {}: unloading '{}': {}", context_.ordinal(), name_, error.what());
  }
}

ModuleLoader::ModuleLoader(const PrimaryContext& context, Target target, ModuleProvider provider)
    : context_(context), target_(std::move(target)), target_name_(target_.name()), provider_(std::move(provider)) {}

int ModuleLoader::device() const noexcept { return context_.ordinal(); }

LoadResult ModuleLoader::load(const KernelSource& source) noexcept {
  LoadResult outcome;
  try {
    for (int attempt = 0;; ++attempt) {
      const ProvidedModule provided = provider_.provide(source, target_);
      if (provided.from_disk) {
        disk_hits_.fetch_add(1, std::memory_order_relaxed);
      } else {
        compiles_.fetch_add(1, std::memory_order_relaxed);
        compile_us_.fetch_add(static_cast<std::uint64_t>(std::max(0.0, provided.module.compile_ms) * 1000),
                              std::memory_order_relaxed);
      }
      if (!(provided.module.target == target_) || provided.module.module != source.module) {
        outcome.reason = "the module provider returned '" + provided.module.module + "' for " +
                         provided.module.target.name() + ", expected '" + source.module + "' for " + target_name_;
        outcome.permanent = true;
        return outcome;
      }

      CUresult result = CUDA_SUCCESS;
      std::string jit_log;
      outcome.module = load_once(source, provided.module, result, jit_log);
      if (result == CUDA_SUCCESS) return outcome;

      outcome.reason = driver_error_message(context_.api(), result, "cuModuleLoadDataEx");
      if (!jit_log.empty()) outcome.reason += ": " + jit_log;
      if (!is_bad_image(result)) return outcome;
      load_refused_.fetch_add(1, std::memory_order_relaxed);
      if (provider_.evict) provider_.evict(source, provided.module);
      // Why: only a binary from disk is worth compiling again; a fresh compile would come out the same.
      outcome.permanent = attempt > 0 || !provided.from_disk;
      if (outcome.permanent) return outcome;
      logger().info("device {}: the driver refused the cached binary of '{}' ({}); evicted, compiling again",
                    device(), source.module, outcome.reason);
    }
  } catch (const std::exception& error) {
    outcome.reason = describe(error);
    outcome.permanent = is_permanent(error);
  } catch (...) {
    outcome.reason = "the module provider threw an exception that is not a std::exception";
  }
  outcome.module = nullptr;
  return outcome;
}

// One cuModuleLoadDataEx and the lookup of every entry, in the device's context. On a load failure
// `result` says why and the result is null; a failed lookup unloads the module and throws.
std::shared_ptr<LoadedModule> ModuleLoader::load_once(const KernelSource& source, const CompiledModule& binary,
                                                      CUresult& result, std::string& jit_log) {
  const void* image = nullptr;
  if (binary.target.kind == OutputKind::cubin) {
    if (binary.cubin.empty()) throw_error("the module provider returned no CUBIN for '" + source.module + "'");
    image = binary.cubin.data();
  } else {
    if (binary.ptx.empty()) throw_error("the module provider returned no PTX for '" + source.module + "'");
    image = binary.ptx.c_str();
  }

  std::array<char, 4096> log{};
  std::array<CUjit_option, 2> options{CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  // Why: the driver takes scalar option values in the pointer slots themselves.
  std::array<void*, 2> values{log.data(), reinterpret_cast<void*>(log.size())};

  const DriverApi& api = context_.api();
  ScopedCurrent current(context_);
  CUmodule module = nullptr;
  result = api.cuModuleLoadDataEx(&module, image, static_cast<unsigned>(options.size()), options.data(), values.data());
  if (result != CUDA_SUCCESS) {
    log.back() = '\0';
    jit_log = log.data();
    return nullptr;
  }
  auto loaded = std::make_shared<LoadedModule>(context_, source.module, module);
  loaded->functions_.assign(source.entries.size(), nullptr);
  for (std::size_t i = 0; i < source.entries.size(); ++i) {
    const CUresult found = api.cuModuleGetFunction(&loaded->functions_[i], module, source.entries[i].c_str());
    if (found != CUDA_SUCCESS) {
      ErrorContext context{"cuModuleGetFunction", source.module, target_name_, {}, {}, static_cast<int>(found)};
      // Why permanent whatever the result: an image without the entry stays so, and it is this image.
      throw_error(ErrorKind::driver, Retry::permanent,
                  driver_error_message(api, found, "cuModuleGetFunction") + " for entry '" + source.entries[i] + "'",
                  std::move(context));
    }
  }
  return loaded;
}

void ModuleLoader::add_counters(ModuleCacheCounters& out) const noexcept {
  out.disk_hits += disk_hits_.load(std::memory_order_relaxed);
  out.compiles += compiles_.load(std::memory_order_relaxed);
  out.compile_ms += static_cast<double>(compile_us_.load(std::memory_order_relaxed)) / 1000.0;
  out.load_refused += load_refused_.load(std::memory_order_relaxed);
}

}  // namespace kiln::driver
