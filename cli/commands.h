#pragma once
// One registration function per subcommand, so main.cpp only wires them up. A command's callback
// stores the process exit status in `exit_code`; user errors it throws as rose::Error become
// "roseinfer: error: ..." and exit 1 in main.
#include <CLI/CLI.hpp>

// roseinfer run PROMPTS.jsonl (cli/cmd_run.cpp).
void register_run_command(CLI::App& app, int& exit_code);
// roseinfer bench [PROMPTS.jsonl | --dataset-name SPEC] (cli/cmd_bench.cpp).
void register_bench_command(CLI::App& app, int& exit_code);
// roseinfer info --model X (cli/cmd_info.cpp).
void register_info_command(CLI::App& app, int& exit_code);
// roseinfer compare BASE.json NEW.json (cli/cmd_compare.cpp).
void register_compare_command(CLI::App& app, int& exit_code);
// roseinfer calibrate RESULTS.json... -o sim.json (cli/cmd_calibrate.cpp).
void register_calibrate_command(CLI::App& app, int& exit_code);
// roseinfer report RESULTS.json... -o report.html (cli/cmd_report.cpp).
void register_report_command(CLI::App& app, int& exit_code);
// roseinfer tokenize PROMPTS.jsonl --model X (cli/cmd_tokenize.cpp).
void register_tokenize_command(CLI::App& app, int& exit_code);
