#include "fake_driver.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>

#include "jit/compiler.hpp"
#include "kiln/error.hpp"

namespace kiln::test {

namespace {

constexpr const char* IMAGE_MAGIC = "KILNFAKE\n";

struct Module {
  std::string tag;
  std::vector<std::string> entries;
  CUcontext context;
};

// Everything the fake functions act on, behind one lock.
struct State {
  std::mutex mutex;
  std::vector<FakeDevice> devices;
  std::map<std::string, int> calls;
  std::map<std::string, std::pair<CUresult, int>> failures;  // call -> (result, calls left)
  std::map<std::uintptr_t, Module> modules;                   // by CUmodule value
  std::uintptr_t next_module = 1;                             // Why: never reset, so stale handles stay stale
  std::map<int, int> retained;
  int loads = 0;
  int unloads = 0;
  std::vector<FakeLaunch> launches;
  // Why poison: a real driver given a function of an unloaded module crashes or worse; the fake
  // counts every such use so a test can fail on it.
  std::set<std::uintptr_t> unloaded;
  int uses_after_unload = 0;
  std::function<void()> launch_hook;
};

State& state() {
  static State instance;
  return instance;
}

thread_local std::vector<CUcontext> current_stack;

// Counts the call; a scripted failure, if any, is the result.
std::optional<CUresult> enter(State& s, const char* call) {
  ++s.calls[call];
  const auto found = s.failures.find(call);
  if (found == s.failures.end() || found->second.second == 0) return std::nullopt;
  --found->second.second;
  return found->second.first;
}

bool valid_device(const State& s, CUdevice device) {
  return device >= 0 && static_cast<std::size_t>(device) < s.devices.size();
}

// CUfunction values: module id in the high bits, entry index + 1 in the low 8.
CUfunction encode_function(std::uintptr_t module, std::size_t index) {
  return reinterpret_cast<CUfunction>(module << 8 | (index + 1));
}

struct ErrorName {
  CUresult result;
  const char* name;
  const char* text;
};
constexpr ErrorName ERROR_NAMES[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
};

const ErrorName* find_error(CUresult result) {
  for (const auto& known : ERROR_NAMES)
    if (known.result == result) return &known;
  return nullptr;
}

CUresult fake_cuGetErrorName(CUresult error, const char** text) {
  const auto* known = find_error(error);
  if (known == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = known->name;
  return CUDA_SUCCESS;
}

CUresult fake_cuGetErrorString(CUresult error, const char** text) {
  const auto* known = find_error(error);
  if (known == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = known->text;
  return CUDA_SUCCESS;
}

CUresult fake_cuInit(unsigned int) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuInit")) return *failed;
  return CUDA_SUCCESS;
}

CUresult fake_cuDriverGetVersion(int* version) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuDriverGetVersion")) return *failed;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetCount(int* count) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuDeviceGetCount")) return *failed;
  *count = static_cast<int>(s.devices.size());
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice* device, int ordinal) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuDeviceGet")) return *failed;
  if (!valid_device(s, ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetName(char* name, int length, CUdevice device) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuDeviceGetName")) return *failed;
  if (!valid_device(s, device)) return CUDA_ERROR_INVALID_DEVICE;
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  const std::string& text = s.devices[static_cast<std::size_t>(device)].name;
  const std::size_t copied = std::min(text.size(), static_cast<std::size_t>(length - 1));
  std::memcpy(name, text.data(), copied);
  name[copied] = '\0';
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuDeviceGetAttribute")) return *failed;
  if (!valid_device(s, device)) return CUDA_ERROR_INVALID_DEVICE;
  const FakeDevice& fake = s.devices[static_cast<std::size_t>(device)];
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = fake.major; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = fake.minor; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = fake.sm_count; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuDevicePrimaryCtxRetain")) return *failed;
  if (!valid_device(s, device)) return CUDA_ERROR_INVALID_DEVICE;
  ++s.retained[device];
  *context = FakeDriver::context_of(device);
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxGetState(CUdevice device, unsigned* flags, int* active) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuDevicePrimaryCtxGetState")) return *failed;
  if (!valid_device(s, device)) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = s.retained[device] > 0;
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuDevicePrimaryCtxRelease_v2")) return *failed;
  if (!valid_device(s, device) || s.retained[device] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --s.retained[device];
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetCurrent(CUcontext* context) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuCtxGetCurrent")) return *failed;
  *context = current_stack.empty() ? nullptr : current_stack.back();
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxPushCurrent_v2(CUcontext context) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuCtxPushCurrent_v2")) return *failed;
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  current_stack.push_back(context);
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxPopCurrent_v2(CUcontext* context) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuCtxPopCurrent_v2")) return *failed;
  if (current_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (context != nullptr) *context = current_stack.back();
  current_stack.pop_back();
  return CUDA_SUCCESS;
}

void write_jit_log(unsigned count, CUjit_option* options, void** values, const std::string& text) {
  char* buffer = nullptr;
  std::size_t size = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buffer = static_cast<char*>(values[i]);
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) size = reinterpret_cast<std::size_t>(values[i]);
  }
  if (buffer == nullptr || size == 0) return;
  const std::size_t copied = std::min(text.size(), size - 1);
  std::memcpy(buffer, text.data(), copied);
  buffer[copied] = '\0';
}

CUresult fake_cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count, CUjit_option* options,
                                 void** values) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuModuleLoadDataEx")) {
    write_jit_log(count, options, values, "fake driver: image refused");
    return *failed;
  }
  if (current_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  const char* text = static_cast<const char*>(image);
  if (std::strncmp(text, IMAGE_MAGIC, std::strlen(IMAGE_MAGIC)) != 0) {
    write_jit_log(count, options, values, "fake driver: not a fake image");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  std::istringstream lines(text + std::strlen(IMAGE_MAGIC));
  Module loaded{{}, {}, current_stack.back()};
  std::getline(lines, loaded.tag);
  for (std::string entry; std::getline(lines, entry);) loaded.entries.push_back(entry);
  const std::uintptr_t id = s.next_module++;
  s.modules.emplace(id, std::move(loaded));
  ++s.loads;
  *module = reinterpret_cast<CUmodule>(id);
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleUnload(CUmodule module) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuModuleUnload")) return *failed;
  if (s.modules.erase(reinterpret_cast<std::uintptr_t>(module)) == 0) return CUDA_ERROR_INVALID_HANDLE;
  s.unloaded.insert(reinterpret_cast<std::uintptr_t>(module));
  ++s.unloads;
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, "cuModuleGetFunction")) return *failed;
  const auto id = reinterpret_cast<std::uintptr_t>(module);
  const auto found = s.modules.find(id);
  if (found == s.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  const auto& entries = found->second.entries;
  const auto entry = std::find(entries.begin(), entries.end(), name);
  if (entry == entries.end()) return CUDA_ERROR_NOT_FOUND;
  *function = encode_function(id, static_cast<std::size_t>(entry - entries.begin()));
  return CUDA_SUCCESS;
}

CUresult record_launch(const char* call, CUfunction function, FakeLaunch launch) {
  auto& s = state();
  std::function<void()> hook;
  {
    std::lock_guard lock(s.mutex);
    hook = s.launch_hook;
  }
  if (hook) hook();
  std::lock_guard lock(s.mutex);
  if (auto failed = enter(s, call)) return *failed;
  const auto value = reinterpret_cast<std::uintptr_t>(function);
  if (s.unloaded.count(value >> 8) != 0) {
    ++s.uses_after_unload;
    return CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  const auto found = s.modules.find(value >> 8);
  const std::size_t index = (value & 0xff) - 1;
  if (found == s.modules.end() || index >= found->second.entries.size()) return CUDA_ERROR_INVALID_HANDLE;
  if (current_stack.empty() || current_stack.back() != found->second.context) return CUDA_ERROR_INVALID_CONTEXT;
  launch.module = found->second.tag;
  launch.entry = found->second.entries[index];
  launch.context = current_stack.back();
  s.launches.push_back(std::move(launch));
  return CUDA_SUCCESS;
}

CUresult fake_cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, CUstream stream, void** args, void**) {
  return record_launch("cuLaunchKernel", function,
                       FakeLaunch{{}, {}, {gx, gy, gz}, {bx, by, bz}, shared, stream, args, nullptr, false});
}

// Records whether the programmatic stream serialization attribute (PDL) was set to 1.
CUresult fake_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction function, void** args, void**) {
  if (config == nullptr || (config->numAttrs != 0 && config->attrs == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  bool dependent = false;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      dependent = config->attrs[i].value.programmaticStreamSerializationAllowed == 1;
  return record_launch("cuLaunchKernelEx", function,
                       FakeLaunch{{},
                                  {},
                                  {config->gridDimX, config->gridDimY, config->gridDimZ},
                                  {config->blockDimX, config->blockDimY, config->blockDimZ},
                                  config->sharedMemBytes,
                                  config->hStream,
                                  args,
                                  nullptr,
                                  dependent});
}

}  // namespace

FakeDriver& FakeDriver::instance() {
  static FakeDriver fake;
  return fake;
}

void FakeDriver::reset(std::vector<FakeDevice> devices) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.devices = std::move(devices);
  s.calls.clear();
  s.failures.clear();
  s.modules.clear();
  s.retained.clear();
  s.loads = 0;
  s.unloads = 0;
  s.launches.clear();
  s.unloaded.clear();
  s.uses_after_unload = 0;
  s.launch_hook = nullptr;
  current_stack.clear();
}

driver::DriverApi FakeDriver::api() const {
  driver::DriverApi api;
#define KILN_FAKE_ENTRY(symbol) api.symbol = fake_##symbol;
  KILN_DRIVER_ENTRY_POINTS(KILN_FAKE_ENTRY)
#undef KILN_FAKE_ENTRY
  // Why the one optional entry: the library itself calls it, for PDL launches.
  api.cuLaunchKernelEx = fake_cuLaunchKernelEx;
  api.loaded = true;
  api.version = Version{13, 0};
  return api;
}

driver::DriverApi FakeDriver::missing() { return driver::load_driver_api("libcuda-kiln-test-missing.so.1"); }

void FakeDriver::on_launch(std::function<void()> hook) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.launch_hook = std::move(hook);
}

int FakeDriver::uses_after_unload() const {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.uses_after_unload;
}

void FakeDriver::fail_next(const std::string& call, CUresult result, int times) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.failures[call] = {result, times};
}

int FakeDriver::calls(const std::string& call) const {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto found = s.calls.find(call);
  return found == s.calls.end() ? 0 : found->second;
}

int FakeDriver::loads() const {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.loads;
}

int FakeDriver::unloads() const {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.unloads;
}

int FakeDriver::live_modules() const {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return static_cast<int>(s.modules.size());
}

int FakeDriver::retained(int ordinal) const {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto found = s.retained.find(ordinal);
  return found == s.retained.end() ? 0 : found->second;
}

std::vector<FakeLaunch> FakeDriver::launches() const {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.launches;
}

CUcontext FakeDriver::context_of(int ordinal) {
  return reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000 + 0x10 * ordinal));
}

CUcontext FakeDriver::foreign_context() { return reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0xf000)); }

std::vector<std::uint8_t> fake_cubin(const std::string& module, const std::vector<std::string>& entries) {
  std::string text = IMAGE_MAGIC + module + "\n";
  for (const auto& entry : entries) text += entry + "\n";
  return std::vector<std::uint8_t>(text.c_str(), text.c_str() + text.size() + 1);  // NUL-terminated, as a real image ends
}

ModuleProvider FakeProvider::provider() {
  return ModuleProvider{
      [this](const KernelSource& source, const Target& target) { return provide(source, target); },
      [this](const KernelSource& source, const CompiledModule& module) {
        std::lock_guard lock(mutex_);
        evicted_.push_back(source.module);
        disk_.erase({source.module, module.target.name()});
      }};
}

ProvidedModule FakeProvider::provide(const KernelSource& source, const Target& target) {
  std::function<void(const KernelSource&)> hook;
  {
    std::lock_guard lock(mutex_);
    ++provided_[source.module];
    hook = hook_;
  }
  if (hook) hook(source);

  std::lock_guard lock(mutex_);
  if (const auto failing = failing_.find(source.module); failing != failing_.end())
    throw_error("nvrtcCompileProgram failed for '" + source.module + "'",
                ErrorContext{"nvrtcCompileProgram", source.module, target.name(), {}, "fake.cu(1): error: fake",
                             failing->second, ErrorKind::compile, compile_retry(failing->second)});
  ProvidedModule out;
  out.module.module = source.module;
  out.module.target = target;
  const auto exported = exports_.find(source.module);
  const auto image = fake_cubin(source.module, exported != exports_.end() ? exported->second : source.entries);
  if (target.kind == OutputKind::cubin)
    out.module.cubin = image;
  else
    out.module.ptx.assign(image.begin(), image.end() - 1);
  const std::pair<std::string, std::string> key{source.module, target.name()};
  out.from_disk = disk_.count(key) != 0;
  if (!out.from_disk) {
    out.module.compile_ms = 2.5;
    disk_.insert(key);
  }
  return out;
}

void FakeProvider::fail(const std::string& module, int nvrtc_result) {
  std::lock_guard lock(mutex_);
  failing_[module] = nvrtc_result;
}

void FakeProvider::export_only(const std::string& module, std::vector<std::string> entries) {
  std::lock_guard lock(mutex_);
  exports_[module] = std::move(entries);
}

void FakeProvider::put_on_disk(const std::string& module, const std::string& target) {
  std::lock_guard lock(mutex_);
  disk_.insert({module, target});
}

void FakeProvider::on_provide(std::function<void(const KernelSource&)> hook) {
  std::lock_guard lock(mutex_);
  hook_ = std::move(hook);
}

int FakeProvider::provided(const std::string& module) const {
  std::lock_guard lock(mutex_);
  const auto found = provided_.find(module);
  return found == provided_.end() ? 0 : found->second;
}

int FakeProvider::provided() const {
  std::lock_guard lock(mutex_);
  int total = 0;
  for (const auto& [module, count] : provided_) total += count;
  return total;
}

std::vector<std::string> FakeProvider::evicted() const {
  std::lock_guard lock(mutex_);
  return evicted_;
}

bool eventually(const std::function<bool()>& condition, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    // Why polling: used where the code under test has no hook to signal (ModuleCache's lock_waits).
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace kiln::test
