// roseinfer: offline batch inference and LLM-scheduling benchmarks (DESIGN.md). Exit status: 0 ok,
// 1 an error (a bad file, model or a failed request; compare: a regression), 2 a bad flag or value.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string_view>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/cluster/ranks.h"
#include "engine/common/error.h"
#include "engine/io/atomic_file.h"
#include "roseinfer_version.h"

namespace {

int run_command(int argc, char** argv);

}  // namespace

// Under mpirun every rank runs main; MPI starts first and ends last (engine/cluster/ranks.h). Only
// rank 0 prints the errors every rank finds alike (flags); a serving rank prints its own failures.
int main(int argc, char** argv) {
  try {
    rose::init_ranks(&argc, &argv);
  } catch (const rose::UsageError& e) {
    fmt::print(stderr, "roseinfer: error: {}\n", e.what());
    return 2;
  } catch (const rose::Error& e) {
    fmt::print(stderr, "roseinfer: error: {}\n", e.what());
    return 1;
  }
  const rose::RankWorld& world = rose::rank_world();
  if (world.size > 1 && (argc < 2 || std::string_view(argv[1]) != "bench")) {
    if (world.rank == 0) {
      fmt::print(stderr,
                 "roseinfer: error: under mpirun with {} processes only `roseinfer bench ... "
                 "--data-parallel N` runs (N a multiple of the ranks)\n",
                 world.size);
    }
    return rose::finish_ranks(2);
  }
  return rose::finish_ranks(run_command(argc, argv));
}

namespace {

int run_command(int argc, char** argv) {
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
    if (rose::rank_world().rank == 0) app.exit(e);  // prints the message and a hint to use --help
    return 2;
  } catch (const rose::UsageError& e) {
    std::fflush(stdout);
    if (rose::rank_world().rank == 0) fmt::print(stderr, "roseinfer: error: {}\n", e.what());
    return 2;
  } catch (const rose::Error& e) {
    std::fflush(stdout);
    const int rank = rose::rank_world().rank;
    fmt::print(stderr, "roseinfer{}: error: {}\n",
               rank > 0 ? fmt::format(" (MPI rank {})", rank) : std::string(), e.what());
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

}  // namespace
