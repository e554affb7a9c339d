// roseinfer: offline batch inference and LLM-scheduling benchmarks (DESIGN.md). Exit status: 0 ok,
// 1 an error (a bad file, model or a failed request; compare: a regression), 2 a bad flag or value.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/common/error.h"
#include "engine/io/atomic_file.h"
#include "roseinfer_version.h"

int main(int argc, char** argv) {
  // Ctrl-C or a kill while an output file is being written must not leave FILE.tmp.<pid> behind.
  rose::install_temp_file_cleanup();
  rose::cli::set_command_line(argc, argv);

  CLI::App app(
      "roseinfer: offline batch LLM inference and scheduling benchmarks on one binary.\n"
      "With no --model, a built-in preset with synthetic weights runs (tiny on the CPU, gpt2 on "
      "CUDA).",
      "roseinfer");
  app.set_version_flag(
      "--version", fmt::format("roseinfer {} (git {})", ROSEINFER_VERSION, ROSEINFER_GIT_COMMIT),
      "print the version and git commit, then exit");
  app.require_subcommand(1);
  app.fallthrough(false);

  int exit_code = 0;
  register_run_command(app, exit_code);
  register_bench_command(app, exit_code);
  register_compare_command(app, exit_code);
  register_report_command(app, exit_code);
  register_info_command(app, exit_code);
  register_calibrate_command(app, exit_code);
  register_tokenize_command(app, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and a hint to use --help
    return 2;
  } catch (const rose::UsageError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "roseinfer: error: {}\n", e.what());
    return 2;
  } catch (const rose::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "roseinfer: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "roseinfer: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "roseinfer: internal error: {}\n", e.what());
    return 1;
  }
  return exit_code;
}
