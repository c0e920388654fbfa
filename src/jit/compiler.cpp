// NVRTC compiles. Why no lock around them: the NVRTC User Guide ("Thread Safety", CUDA 11.x to
// 13.0) allows concurrent NVRTC calls except on the same nvrtcProgram while one of them compiles or
// adds a name expression, and every compile here creates, uses and destroys its own program.
// NVIDIA/cccl#9998 relies on the same guarantee. The process locale is the one shared input; see
// ScopedCLocale.
#include "jit/compiler.hpp"

#include <chrono>

#include "base/config.hpp"
#include "base/log.hpp"
#include "c_locale.hpp"
#include "jit/compile_log.hpp"
#include "jit/dump.hpp"
#include "jit/nvrtc_api.hpp"
#include "kiln/error.hpp"

namespace kiln {

namespace {

struct CompileScope {
  const NvrtcApi& api;
  const KernelSource& source;
  const Target& target;
  const std::vector<std::string>& options;

  ErrorContext context(const char* call, nvrtcResult result, std::string log = {},
                       Retry retry = Retry::transient) const {
    return {call, source.module, target.name(), options, std::move(log), static_cast<int>(result), ErrorKind::compile,
            retry};
  }
};

void check(nvrtcResult result, const char* call, const CompileScope& scope) {
  if (result == NVRTC_SUCCESS) return;
  throw_error(std::string(call) + " failed for module '" + scope.source.module + "' (" + scope.target.name() +
                  "): " + scope.api.error_text(result),
              scope.context(call, result));
}

/// Owns one nvrtcProgram.
class Program {
 public:
  explicit Program(const CompileScope& scope) : api_(scope.api) {
    const auto& headers = embedded_headers();
    std::vector<const char*> texts, names;
    // Why copies: NVRTC takes NUL-terminated strings and the embedded views promise no terminator.
    std::vector<std::string> header_texts;
    header_texts.reserve(headers.size());
    for (const auto& header : headers) {
      header_texts.emplace_back(header.text);
      texts.push_back(header_texts.back().c_str());
      names.push_back(header.name.c_str());
    }
    const std::string text(scope.source.text);
    const std::string name = scope.source.module + ".cu";
    check(api_.nvrtcCreateProgram(&program_, text.c_str(), name.c_str(), static_cast<int>(texts.size()), texts.data(),
                             names.data()),
          "nvrtcCreateProgram", scope);
  }
  ~Program() {
    if (program_ == nullptr) return;
    if (const nvrtcResult result = api_.nvrtcDestroyProgram(&program_); result != NVRTC_SUCCESS)
      logger().warn("nvrtcDestroyProgram failed: {}", api_.error_text(result));
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  nvrtcProgram get() const { return program_; }

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_ = nullptr;
};

/// NVRTC sizes count a trailing NUL (PTX, log); binary outputs (CUBIN) have none.
template <typename Out, typename SizeFn, typename GetFn>
Out fetch(nvrtcProgram program, SizeFn size_fn, GetFn get_fn, const char* size_call, const char* get_call,
          const CompileScope& scope) {
  std::size_t size = 0;
  check(size_fn(program, &size), size_call, scope);
  Out out(size, typename Out::value_type{});
  if (size != 0) check(get_fn(program, reinterpret_cast<char*>(out.data())), get_call, scope);
  return out;
}

std::string strip_nul(std::string text) {
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

std::vector<SourceText> source_texts(const KernelSource& source, const std::string& name) {
  std::vector<SourceText> files{{name, source.text.substr(source.prelude_bytes)}};
  for (const auto& header : embedded_headers()) files.push_back({header.name, header.text});
  return files;
}

[[noreturn]] void throw_compile_error(nvrtcResult result, std::string log, const CompileScope& scope) {
  std::string message = "module '" + scope.source.module + "' does not compile for " + scope.target.name() + " (" +
                        scope.api.error_text(result) + ")\n";
  message += format_compile_log(log, source_texts(scope.source, scope.source.module + ".cu"));
  message += "NVRTC options:";
  for (const auto& option : scope.options) message += " " + option;
  throw_error(message, scope.context("nvrtcCompileProgram", result, std::move(log), compile_retry(result)));
}

}  // namespace

std::vector<std::string> compile_options(const Target& target, bool lineinfo) {
  std::vector<std::string> options{"-arch=" + target.name(), "-std=c++17", "-default-device"};
  if (lineinfo) options.emplace_back("-lineinfo");
  return options;
}

bool lineinfo_from_env() { return current_config().lineinfo; }

CompiledModule compile_module(const KernelSource& source, const Target& target,
                              const std::vector<std::string>& options) {
  if (!target.carries(source.family))
    throw_error("module '" + source.module + "' is of family '" + source.family + "', which " + target.name() +
                    " does not carry (hopper modules build only for sm_90/sm_90a)",
                {"compile_module", source.module, target.name(), options, {}});
  const NvrtcApi& api = require_nvrtc("compiling module '" + source.module + "' for " + target.name());
  const CompileScope scope{api, source, target, options};
  const detail::ScopedCLocale c_locale;

  const Program program(scope);
  std::vector<const char*> argv;
  for (const auto& option : options) argv.push_back(option.c_str());

  const auto start = std::chrono::steady_clock::now();
  const nvrtcResult compiled = api.nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  std::string log = strip_nul(fetch<std::string>(program.get(), api.nvrtcGetProgramLogSize, api.nvrtcGetProgramLog,
                                                 "nvrtcGetProgramLogSize", "nvrtcGetProgramLog", scope));
  if (compiled != NVRTC_SUCCESS) throw_compile_error(compiled, std::move(log), scope);

  CompiledModule module;
  module.module = source.module;
  module.target = target;
  module.options = options;
  module.ptx = strip_nul(fetch<std::string>(program.get(), api.nvrtcGetPTXSize, api.nvrtcGetPTX, "nvrtcGetPTXSize",
                                            "nvrtcGetPTX", scope));
  if (target.kind == OutputKind::cubin)
    module.cubin = fetch<std::vector<std::uint8_t>>(program.get(), api.nvrtcGetCUBINSize, api.nvrtcGetCUBIN,
                                                    "nvrtcGetCUBINSize", "nvrtcGetCUBIN", scope);
  module.log = std::move(log);
  module.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (module.ptx.empty() || (target.kind == OutputKind::cubin && module.cubin.empty()))
    throw_error("NVRTC returned no " + std::string(module.ptx.empty() ? "PTX" : "CUBIN") + " for module '" +
                    source.module + "' (" + target.name() + ")",
                scope.context("nvrtcCompileProgram", NVRTC_SUCCESS, module.log, compile_retry(NVRTC_SUCCESS)));
  logger().debug("compiled {} for {} in {:.1f} ms (ptx {} B, cubin {} B)", source.module, target.name(),
                 module.compile_ms, module.ptx.size(), module.cubin.size());
  return module;
}

Retry compile_retry(int nvrtc_result) {
  const auto result = static_cast<nvrtcResult>(nvrtc_result);
  // Why NVRTC_SUCCESS: a compile that "passed" with no PTX returns nothing on every try.
  return result == NVRTC_SUCCESS || result == NVRTC_ERROR_COMPILATION || result == NVRTC_ERROR_INVALID_OPTION
             ? Retry::permanent
             : Retry::transient;
}

Compiler::Compiler() : lineinfo_(lineinfo_from_env()) {}

CompiledModule Compiler::compile(const KernelSource& source, const Target& target) const {
  CompiledModule module = compile_module(source, target, options(target));
  dump_if_requested(module, source);
  return module;
}

}  // namespace kiln
