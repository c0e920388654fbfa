#include "bench_spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bench_stats.hpp"
#include "kiln/error.hpp"

extern char** environ;

namespace kiln::bench {

namespace {

std::string self_path() {
  std::vector<char> buffer(4096);
  const ssize_t length = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (length <= 0) throw_error(std::string("readlink /proc/self/exe failed: ") + std::strerror(errno));
  return std::string(buffer.data(), static_cast<std::size_t>(length));
}

std::vector<char*> pointers(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (auto& word : words) out.push_back(word.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::vector<std::string> child_environment(const std::vector<std::string>& drop, const std::vector<std::string>& add) {
  std::vector<std::string> out;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    if (std::find(drop.begin(), drop.end(), name) == drop.end()) out.push_back(text);
  }
  out.insert(out.end(), add.begin(), add.end());
  return out;
}

ChildRun run_self(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  static const std::string program = self_path();
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw_error(std::string("pipe2 failed: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  if (const int failed = posix_spawn_file_actions_init(&actions); failed != 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw_error(std::string("posix_spawn_file_actions_init failed: ") + std::strerror(failed));
  }
  int spawned = posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);

  std::vector<std::string> argv_words{"kiln"};
  argv_words.insert(argv_words.end(), args.begin(), args.end());
  argv_words.push_back("--spawned-at");
  argv_words.emplace_back();
  std::vector<std::string> env_words = env;
  auto envp = pointers(env_words);

  pid_t pid = 0;
  const std::int64_t start = now_ns();
  argv_words.back() = std::to_string(start);
  auto argv = pointers(argv_words);
  if (spawned == 0) spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    throw_error("cannot run '" + program + "': " + std::strerror(spawned));
  }

  ChildRun run;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (got > 0) {
      run.output.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0) {
      break;
    } else if (errno != EINTR) {
      const int read_errno = errno;
      ::close(pipe_fds[0]);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      throw_error(std::string("reading the child's output failed: ") + std::strerror(read_errno));
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw_error(std::string("waitpid failed: ") + std::strerror(errno));
  run.wall_ms = ms_between(start, now_ns());
  run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace kiln::bench
