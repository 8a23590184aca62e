// crossover's command line: the subcommands registered, the one that was named run, and every
// failure turned into a message and an exit code (the list of codes: core/exit_codes.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/format.h"
#include "core/interrupt.h"
#include "distributed/mpi.h"
#include "distributed/process.h"

namespace {

// The commands that run across the ranks of an MPI job; `sweep` along ranks only (it says so).
bool runs_on_ranks(const std::string& command) {
  return command == "train" || command == "sweep" || command == "tune" || command == "allreduce";
}

// A usage error: the same prefix and exit code as every other bad input (CLI11's own codes, 105,
// 106, ..., mean nothing to a script), and where the usage is.
int usage_error(const std::vector<xo::cli::Command>& commands, const CLI::ParseError& e, int argc,
                char** argv) {
  std::string usage = "crossover --help";
  std::string message = e.what();
  std::vector<std::string> names;
  bool parsed = false;
  for (const auto& command : commands) {
    names.push_back(command.app->get_name());
    if (command.app->parsed()) {
      usage = "crossover " + command.app->get_name() + " --help";
      parsed = true;
    }
  }
  if (!parsed && argc > 1 && argv[1][0] != '-') {
    message =
        fmt::format("unknown command '{}' (expected one of {})", argv[1], fmt::join(names, ", "));
  }
  // Every rank of an MPI job parsed the same line: rank 0 says it.
  if (xo::mpi::launched_rank() == 0) {
    fmt::print(stderr, "crossover: error: {} (`{}` shows the usage)\n", xo::terminal_safe(message),
               usage);
  }
  return xo::kExitBadInput;
}

// Under a launcher with several ranks, only the commands that use them run; any other would run
// once per rank, each into the same files. False (and said) for such a command.
bool fits_the_launch(const std::vector<xo::cli::Command>& commands) {
  const int ranks = xo::mpi::launched() ? xo::mpi::launched_size() : 1;
  if (ranks <= 1) return true;
  for (const auto& command : commands) {
    const std::string name = command.app->get_name();
    if (!command.app->parsed() || runs_on_ranks(name)) continue;
    if (xo::mpi::launched_rank() == 0) {
      fmt::print(stderr,
                 "crossover: error: `crossover {}` was started on {} ranks of an MPI job, and is "
                 "one process: run it without mpirun (under mpirun, `train` trains one model on "
                 "every rank, `sweep --vary ranks=1,2,...` measures the scaling, `tune` runs "
                 "trials on the ranks and `allreduce` measures the link)\n",
                 name, ranks);
    }
    return false;
  }
  return true;
}

// Each command's name and what adds it, in the order `crossover --help` lists them.
struct CommandEntry {
  std::string_view name;
  xo::cli::Command (*add)(CLI::App&);
};
constexpr CommandEntry kCommands[] = {{"run", xo::cli::add_run},
                                      {"train", xo::cli::add_train},
                                      {"models", xo::cli::add_models},
                                      {"devices", xo::cli::add_devices},
                                      {"sweep", xo::cli::add_sweep},
                                      {"advise", xo::cli::add_advise},
                                      {"cost", xo::cli::add_cost},
                                      {"replay", xo::cli::add_replay},
                                      {"import", xo::cli::add_import},
                                      {"tune", xo::cli::add_tune},
                                      {"validate", xo::cli::add_validate},
                                      {"allreduce", xo::cli::add_allreduce},
                                      {"train-group", xo::cli::add_train_group},
                                      {"evaluate", xo::cli::add_evaluate},
                                      {"predict", xo::cli::add_predict}};

// The commands on `app`: only the one the first argument names, where it names one (adding every
// command's options is a third of a process's start, about 6 of 17 ms, paid by each trial process
// of a search: docs/benchmarks.md, "A search's fixed costs"), else all of them (the usage, an
// unknown command's message).
std::vector<xo::cli::Command> add_commands(CLI::App& app, int argc, char** argv) {
  std::vector<xo::cli::Command> commands;
  auto add = [&](const CommandEntry& entry) {
    commands.push_back(entry.add(app));
    if (commands.back().app->get_name() != entry.name) {
      throw std::logic_error(fmt::format("the command listed as {} is named {}", entry.name,
                                         commands.back().app->get_name()));
    }
  };
  for (const CommandEntry& entry : kCommands) {
    if (argc > 1 && argv[1] == entry.name) {
      add(entry);
      return commands;
    }
  }
  for (const CommandEntry& entry : kCommands) add(entry);
  return commands;
}

// Runs the command that was named; what it throws ends it as core/exit_codes.h's failure_of
// says.
int run_command(const std::vector<xo::cli::Command>& commands) {
  // What the command was doing, for the messages of the failures that carry no context.
  std::string doing = "crossover";
  try {
    for (const auto& command : commands) {
      if (command.app->parsed()) {
        doing = "crossover " + command.app->get_name();
        return command.run();
      }
    }
    return 1;
  } catch (...) {
    const xo::Failure f = xo::failure_of(std::current_exception(), doing);
    fmt::print(stderr, "{}\n", f.line);
    return f.code;
  }
}

}  // namespace

int main(int argc, char** argv) {
  xo::install_interrupt_handler();  // before any other thread starts
  // Each line reaches a file or a pipe when it is printed (the run's header at once, each epoch's
  // line as it ends), as it reaches a terminal: redirected output is not held back in a buffer
  // until the end, or lost with it when the process is ended.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  // A process a search started before its job was known (distributed/process.h's
  // ParkedProcess): the job comes as its arguments, and runs as if it had been started with them.
  std::vector<std::string> job;
  std::vector<char*> job_argv;
  if (argc == 2 && std::string_view(argv[1]) == "--parked") {
    job = xo::wait_for_job();
    job_argv.push_back(argv[0]);
    for (std::string& a : job) job_argv.push_back(a.data());
    job_argv.push_back(nullptr);
    argc = static_cast<int>(job.size()) + 1;
    argv = job_argv.data();
  }
  CLI::App app{
      "crossover: train the same network on the CPU and the GPU and measure where each wins.\n"
      "Run `crossover run` for the classic disc sweep, `crossover train disc-8` for one model."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("crossover ") + CROSSOVER_VERSION);
  const std::vector<xo::cli::Command> commands = add_commands(app, argc, argv);
  xo::cli::record_command_line(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return usage_error(commands, e, argc, argv);
  }
  if (!fits_the_launch(commands)) return xo::kExitBadInput;
  return run_command(commands);
}
