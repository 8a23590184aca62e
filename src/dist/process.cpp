#include "dist/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/interrupt.h"
#include "dist/mpi.h"

namespace xo {

pid_t spawn(const std::vector<std::string>& args, const std::filesystem::path& log) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (!mpi::is_launcher_variable(entry.substr(0, entry.find('=')))) env.push_back(entry);
  }
  std::vector<char*> argv, envp;
  const std::string exe = "/proc/self/exe";
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    throw UserError(fmt::format("could not start a crossover process: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    unblock_stop_signals();  // the program it runs starts with the signals' defaults
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(kExitNotStarted);
    // Never through a link, never a FIFO's wait: a log that cannot be opened so is not started.
    const int fd =
        open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) _exit(kExitNotStarted);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(kExitNotStarted);
  }
  return pid;
}

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitNotStarted;
}

int run_child(const std::vector<std::string>& args, const std::filesystem::path& log) {
  const pid_t pid = spawn(args, log);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return kExitNotStarted;
  }
  return exit_status(status);
}

}  // namespace xo
