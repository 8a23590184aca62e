// The CLI's subcommands. main.cpp registers them with CLI11; each returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

#include "core/exit_codes.h"

namespace xo::cli {

// A registered subcommand and what runs it once the command line is parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_train(CLI::App& app);
Command add_train_group(CLI::App& app);
Command add_evaluate(CLI::App& app);
Command add_predict(CLI::App& app);
Command add_run(CLI::App& app);
Command add_models(CLI::App& app);
Command add_devices(CLI::App& app);
Command add_sweep(CLI::App& app);
Command add_advise(CLI::App& app);
Command add_cost(CLI::App& app);
Command add_replay(CLI::App& app);
Command add_import(CLI::App& app);
Command add_tune(CLI::App& app);
Command add_validate(CLI::App& app);
Command add_allreduce(CLI::App& app);

// The exit codes every command returns are listed once, in core/exit_codes.h.

// The command line as typed, shell-quoted: main() records it, the manifest of every report
// written carries it.
void record_command_line(int argc, const char* const* argv);
const std::string& recorded_command_line();

// Validators whose messages say what was expected in words (CLI11's own print the float range).
CLI::Validator positive_number();
CLI::Validator non_negative_integer();

}  // namespace xo::cli
