#include "distributed/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/interrupt.h"
#include "distributed/mpi.h"

namespace xo {

namespace {

// Opens `log` for a child's output, appended, onto its standard output and error: never through a
// link, never a FIFO's wait (a log that cannot be opened so is refused). Without a log, nothing.
bool output_to(const char* log) {
  const int fd =
      log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644)
          : open("/dev/null", O_WRONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || (log && !S_ISREG(st.st_mode))) return false;
  dup2(fd, STDOUT_FILENO);
  dup2(fd, STDERR_FILENO);
  ::close(fd);
  return true;
}

// The program children run (set_crossover_program); empty: this process's own binary.
std::string& crossover_program() {
  static std::string program;
  return program;
}

// Forks a child that executes this binary with `args`, this process's environment less the MPI
// launcher's variables, `in` as its standard input (-1: this process's) and its output to `log`
// (null: nothing); it ends when this process ends. The child's pid.
pid_t fork_crossover(const std::vector<std::string>& args, const char* log, int in) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (!mpi::is_launcher_variable(entry.substr(0, entry.find('=')))) env.push_back(entry);
  }
  std::vector<char*> argv, envp;
  const std::string exe =
      crossover_program().empty() ? std::string("/proc/self/exe") : crossover_program();
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
    if (in >= 0) dup2(in, STDIN_FILENO);
    if (!output_to(log)) _exit(kExitNotStarted);
    execve(argv[0], argv.data(), envp.data());
    _exit(kExitNotStarted);
  }
  return pid;
}

}  // namespace

void set_crossover_program(const std::filesystem::path& program) {
  crossover_program() = program.string();
}

pid_t spawn(const std::vector<std::string>& args, const std::filesystem::path& log) {
  return fork_crossover(args, log.c_str(), -1);
}

// The job goes down a socket, not a pipe: a parked process that died is an error to send to
// (MSG_NOSIGNAL), not a SIGPIPE to this process.
ParkedProcess::ParkedProcess() {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    throw UserError(fmt::format("could not start a crossover process: {}", std::strerror(errno)));
  }
  try {
    pid_ = fork_crossover({"--parked"}, nullptr, ends[1]);
  } catch (...) {
    ::close(ends[0]);
    ::close(ends[1]);
    throw;
  }
  ::close(ends[1]);
  job_ = ends[0];
}

ParkedProcess::~ParkedProcess() {
  if (job_ >= 0) end();
}

void ParkedProcess::end() {
  ::close(job_);  // no job: it ends
  job_ = -1;
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

pid_t ParkedProcess::start(const std::vector<std::string>& args, const std::filesystem::path& log) {
  // Each text ends with a NUL; the end of the stream ends the job.
  std::string job = log.string() + '\0';
  for (const std::string& a : args) job += a + '\0';
  for (size_t sent = 0; sent < job.size();) {
    const ssize_t n = send(job_, job.data() + sent, job.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      end();  // it is gone (killed): started afresh instead
      return spawn(args, log);
    }
    sent += static_cast<size_t>(n);
  }
  ::close(job_);
  job_ = -1;
  return pid_;
}

std::vector<std::string> wait_for_job() {
  std::string job;
  char buffer[4096];
  for (ssize_t n; (n = read(STDIN_FILENO, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) _exit(0);
    job.append(buffer, static_cast<size_t>(n));
  }
  if (job.empty()) _exit(0);  // not needed: the search ended, or was stopped
  std::vector<std::string> texts;
  for (size_t at = 0; at < job.size();) {
    const size_t end = job.find('\0', at);
    if (end == std::string::npos) {
      std::fputs(
          "crossover --parked: the job on standard input ends inside a text (expected "
          "the log and each argument, each ending with a NUL byte)\n",
          stderr);
      _exit(kExitNotStarted);
    }
    texts.push_back(job.substr(at, end - at));
    at = end + 1;
  }
  const int none = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (none >= 0) {
    dup2(none, STDIN_FILENO);
    ::close(none);
  }
  if (!output_to(texts.front().c_str())) {
    std::fprintf(stderr,
                 "crossover --parked: %s: cannot write the job's log there (expected a regular "
                 "file, or a name for one, never a link)\n",
                 texts.front().c_str());
    _exit(kExitNotStarted);
  }
  texts.erase(texts.begin());
  return texts;
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
