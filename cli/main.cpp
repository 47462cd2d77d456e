// The npusim command line. This is the only place where exceptions become messages and exit statuses.
#include <CLI/CLI.hpp>
#include <systemc>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "cli/info_command.hpp"
#include "cli/kernel_command.hpp"
#include "cli/memtrace_command.hpp"
#include "cli/op_command.hpp"
#include "cli/plot_command.hpp"
#include "cli/run_command.hpp"
#include "cli/sweep_command.hpp"
#include "common/config/loader.hpp"
#include "common/util/atomic_file.hpp"
#include "common/util/error.hpp"
#include "stack/framework/session.hpp"

namespace {

constexpr int kExitError = 1;  // bad input or a failed simulation
constexpr int kExitUsage = 2;  // bad command line

struct ConfigOptions {
  std::string config{npusim::config::kDefaultConfig};
  std::vector<std::string> sets;
  bool sanitize = false;
  // The config overrides, --sanitize included (it is the key sim.sanitize).
  std::vector<std::string> all_sets() const {
    std::vector<std::string> s = sets;
    if (sanitize) s.push_back("sim.sanitize=true");
    return s;
  }
};

// --sanitize of the commands that run kernels.
void add_sanitize_flag(CLI::App& cmd, ConfigOptions& opts) {
  cmd.add_flag("--sanitize", opts.sanitize,
               "check every kernel for races between pipes on local buffers, flags left set and queue buffers never "
               "freed (docs/kernel-sdk.md); exit 1 with both instructions' source lines");
}

void add_config_options(CLI::App& cmd, ConfigOptions& opts) {
  std::string names;
  for (const auto& b : npusim::config::builtin_configs()) names += (names.empty() ? "" : ", ") + std::string(b.name);
  cmd.add_option("--config", opts.config, "chip config: a built-in name (" + names + ") or a YAML file")
      ->capture_default_str();
  cmd.add_option("--set", opts.sets, "override a config key, e.g. --set l2.capacity=96MiB (repeatable)")
      ->type_name("KEY=VALUE");
}

// --json, --trace FILE, --summary FILE, --stats FILE of the simulating commands.
void add_output_options(CLI::App& cmd, bool& json, npusim::stack::runtime::OutputPaths& out) {
  cmd.add_flag("--json", json, "print one JSON object (keys in docs/metrics.md)");
  CLI::Option* trace = cmd.add_option("--trace", out.trace,
                                      "write a Chrome/Perfetto trace to FILE (gzip-compressed when FILE ends in .gz)")
                           ->type_name("FILE");
  npusim::stack::runtime::TraceOptions& t = out.trace_options;
  // The parsers' InputErrors become CLI11's usage errors (exit 2, with the option's name).
  auto usage = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const npusim::InputError& e) {
      throw CLI::ValidationError(e.what());
    }
  };
  cmd.add_option_function<std::string>(
         "--trace-level",
         [&t, usage](const std::string& v) {
           usage([&] { t.level = npusim::stack::runtime::parse_trace_level(v, "--trace-level"); });
         },
         "what the trace shows: task (API calls, streams, memory), block (and each core's blocks) or instr (and the "
         "pipes' instructions on the --trace-cores) [default: instr]")
      ->type_name("LEVEL")
      ->needs(trace);
  cmd.add_option("--trace-cores", t.cores,
                 "cores whose pipes an instr trace shows: names and ranges (aic0,aiv0-3) or all [default: the first "
                 "core group, e.g. aic0,aiv0,aiv1]")
      ->type_name("LIST")
      ->needs(trace);
  cmd.add_option_function<std::string>(
         "--trace-window",
         [&t, usage](const std::string& v) {
           usage([&] { npusim::stack::runtime::parse_trace_window(v, "--trace-window", t); });
         },
         "trace instructions only from START to END microseconds of device time (either may be left out)")
      ->type_name("START:END")
      ->needs(trace);
  cmd.add_option("--trace-limit", t.max_slices,
                 "the most instruction slices and flag events a trace keeps; the rest are left out, with a warning")
      ->type_name("N")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
      ->capture_default_str()
      ->needs(trace);
  cmd.add_option("--summary", out.summary, "write the op summary CSV to FILE")->type_name("FILE");
  cmd.add_option("--stats", out.stats, "write every component's statistics (chip.aiv0.mte2.bytes, ...) as JSON to FILE")
      ->type_name("FILE");
}

}  // namespace

// libsystemc owns main() and calls sc_main() (SystemC elaborates once per process).
int sc_main(int argc, char** argv) {
  CLI::App app{"npusim: a cycle-approximate Da Vinci-style NPU simulator with its software stack"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "npusim 0.1.0");

  ConfigOptions info_opts;
  bool info_json = false;
  CLI::App* info = app.add_subcommand("info", "print the device facts of a chip config, like npu-smi info");
  add_config_options(*info, info_opts);
  info->add_flag("--json", info_json, "print one JSON object instead of the table");

  npusim::cli::KernelOptions kopts;
  ConfigOptions kernel_cfg;
  CLI::App* kernel = app.add_subcommand("kernel", "run a built-in sample kernel on the simulated chip");
  kernel->add_option("name", kopts.name, "a sample kernel's name, or your kernel: an Ascend C source (.cpp) or a "
                                          "kernel library (.so) built with the SDK")->required();
  add_config_options(*kernel, kernel_cfg);
  add_sanitize_flag(*kernel, kernel_cfg);
  kernel->add_option("-p,--param", kopts.params, "sample kernel parameter (repeatable)")->type_name("KEY=VALUE");
  add_output_options(*kernel, kopts.json, kopts.files);
  kernel->add_option("--check", kopts.check_refs,
                     "functional mode, compared with the CPU reference (samples) or with REF.npy for your kernel's "
                     "output (NAME=REF.npy with several); exit 3 on mismatch")
      ->expected(0, 1)
      ->type_name("[NAME=]REF.npy");
  kernel->add_flag("--functional", kopts.functional, "compute real values (default: timing-only, same cycles)");
  kernel->add_option("--entry", kopts.entry, "your kernel: the __global__ function to launch (default: the only one)")
      ->type_name("NAME");
  kernel->add_option("--block-dim", kopts.block_dim, "your kernel: blocks to launch")
      ->check(CLI::Range(1, 65535))
      ->type_name("N")
      ->capture_default_str();
  kernel->add_option("--type", kopts.type, "your kernel: vector (AIV), cube (AIC) or mix (1 AIC + its AIVs per block)")
      ->check(CLI::IsMember({"vector", "cube", "mix"}))
      ->capture_default_str();
  kernel->add_option("--arg", kopts.args,
                     "your kernel's arguments in order: NAME=IN.npy, NAME=random:DTYPE:SHAPE, NAME=zeros:DTYPE:SHAPE, "
                     "NAME=out:DTYPE:SHAPE, NAME=tiling, or NAME=NUMBER for a scalar parameter (repeatable)")
      ->type_name("NAME=SPEC");
  kernel->add_option("--tiling", kopts.tiling, "your kernel: the tiling struct's values, k=v,... or a JSON file")
      ->type_name("K=V,...|FILE.json");
  kernel->add_option("--tiling-schema", kopts.tiling_schema, "your kernel: the tiling struct's fields (JSON, docs/kernel-sdk.md)")
      ->type_name("FILE.json");
  kernel->add_option("--outputs", kopts.outputs, "your kernel: write each out: argument to DIR/NAME.npy (functional)")
      ->type_name("DIR");
  kernel->add_option("--cxxflags", kopts.cxxflags, "your kernel source: an extra compiler flag (repeatable)")
      ->type_name("FLAG")
      ->allow_extra_args(false);
  kernel->add_option("--atol", kopts.atol, "--check: absolute tolerance (default per dtype)");
  kernel->add_option("--rtol", kopts.rtol, "--check: relative tolerance (default per dtype)");
  kernel->footer("Sample kernels:\n" + npusim::cli::describe_kernels() +
                 "\nYour kernel: npusim kernel add_custom.cpp --block-dim 8 --arg x=random:fp16:8x2048 "
                 "--arg y=random:fp16:8x2048 --arg z=out:fp16:8x2048 --check z=ref.npy (docs/kernel-sdk.md)");

  npusim::cli::MemtraceOptions mopts;
  ConfigOptions memtrace_cfg;
  CLI::App* memtrace = app.add_subcommand("memtrace", "replay a memory request trace (DRAMsim3 format) against the memory model");
  memtrace->add_option("file", mopts.file, "trace: one '<hex address> READ|WRITE <cycle>' per line")->required();
  add_config_options(*memtrace, memtrace_cfg);
  memtrace->add_flag("--no-l2", mopts.no_l2, "send the requests straight to the HBM controllers");
  memtrace->add_option("--bytes", mopts.bytes, "bytes per request (a multiple of hbm.burst_bytes)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  memtrace->add_flag("--json", mopts.json, "print one JSON object (keys in docs/metrics.md)");
  memtrace
      ->add_option("--stats", mopts.stats, "write the memory system's counters (chip.hbm.*, chip.l2.*) as JSON to FILE")
      ->type_name("FILE");

  npusim::cli::OpOptions oopts;
  ConfigOptions op_cfg;
  CLI::App* op = app.add_subcommand("op", "run one library op on seeded random inputs through the runtime");
  op->add_option("name", oopts.name, "op")->required();
  add_config_options(*op, op_cfg);
  add_sanitize_flag(*op, op_cfg);
  op->add_option("-p,--param", oopts.params, "op parameter, e.g. -p shape=1024x1024 (repeatable)")->type_name("KEY=VALUE");
  op->add_option("--dtype", oopts.dtype, "fp16, bf16 or fp32")->capture_default_str();
  op->add_flag("--check", oopts.check, "functional mode; compare with the CPU reference (fp32 from the same inputs)");
  op->add_option("--warmup", oopts.warmup,
                 "launch the op N times first on the same buffers, as a benchmark loop does (warm caches); the report "
                 "covers the last launch and the copies out")
      ->check(CLI::Range(std::uint32_t{0}, npusim::stack::framework::Session::kMaxWarmup));
  add_output_options(*op, oopts.json, oopts.files);
  op->footer(
      "Ops (each with its -p parameters: the required ones, then the optional ones with the value taken when "
      "left out; in parentheses, a rule):\n" +
      npusim::cli::describe_ops());

  npusim::cli::RunOptions ropts;
  ConfigOptions run_cfg;
  CLI::App* run = app.add_subcommand(
      "run",
      "run an ONNX model through the stack (import, lower to library ops, runtime), or an LLM from its "
      "HuggingFace config.json: prefill and decode steps (docs/llm.md)");
  run->add_option("model", ropts.model, "MODEL.onnx, or an LLM's directory (config.json, *.safetensors) or config.json")
      ->required();
  add_config_options(*run, run_cfg);
  add_sanitize_flag(*run, run_cfg);
  run->add_option("--dim", ropts.dims, "bind a symbolic input dim, e.g. --dim batch=4 (repeatable)")->type_name("NAME=SIZE");
  run->add_flag("--functional", ropts.functional, "compute the values (seeded random inputs); outputs summarised in --json");
  run->add_option("--inputs", ropts.inputs_dir,
                  "with --functional: read input NAME from DIR/NAME.npy or DIR/NAME.pb (an ONNX TensorProto), or the "
                  "K-th input from DIR/input_K.pb (ONNX's test_data_set_N layout)")
      ->type_name("DIR");
  run->add_option("--outputs", ropts.outputs_dir,
                  "with --functional: write output NAME to DIR/NAME.npy and DIR/NAME.pb, and the K-th output to "
                  "DIR/output_K.pb (DIR is made if missing)")
      ->type_name("DIR");
  run->add_flag("--progress", ropts.progress, "report simulation progress on stderr (tasks done, device time) also when stderr is not a terminal");
  run->add_flag("--no-fusion", ropts.no_fusion, "run the graph as imported (constants folded), without the fusion passes");
  run->add_flag("--explain-fusion", ropts.explain_fusion,
                "say what each fusion candidate (attention: a Softmax feeding a MatMul) became, or the condition it "
                "failed (on stderr with --json, whose graph.unfused lists the failures)");
  run->add_option("--streams", ropts.streams, "at most this many streams for independent branches (1: one stream in graph order)")
      ->check(CLI::Range(1, 64))
      ->type_name("N")
      ->capture_default_str();
  CLI::Option* decode_opt =
      run->add_option("--decode", ropts.decode, "LLM: decode steps after the prefill (tokens after the first)")
          ->check(CLI::Range(0, 65536))
          ->type_name("N")
          ->capture_default_str();
  CLI::Option* prompt_opt = run->add_option("--prompt-len", ropts.prompt_len, "LLM: tokens of each prompt")
                                ->check(CLI::Range(1, 1 << 20))
                                ->type_name("P")
                                ->capture_default_str();
  CLI::Option* batch_opt = run->add_option("--batch", ropts.batch, "LLM: sequences decoded together")
                               ->check(CLI::Range(1, 4096))
                               ->type_name("B")
                               ->capture_default_str();
  CLI::Option* page_opt = run->add_option("--page", ropts.page, "LLM: KV cache rows per page (a multiple of 16)")
                              ->check(CLI::Range(16, 4096))
                              ->type_name("ROWS")
                              ->capture_default_str();
  CLI::Option* replay_opt = run->add_flag("--no-replay", ropts.no_replay,
                                          "LLM, timing-only: simulate every layer (by default layers 2.. take layer "
                                          "1's kernel times when the L2 cannot tell them apart; docs/llm.md)");
  add_output_options(*run, ropts.json, ropts.files);

  npusim::cli::SweepOptions sopts;
  CLI::App* sweep = app.add_subcommand("sweep", "explore a design space: run workloads over config axes (docs/exploration.md)");
  sweep->add_option("spec", sopts.spec, "SPEC.yaml: base config, axes, derived keys, workloads, metrics")->required();
  sweep->add_option("-o,--out", sopts.out, "results folder (default: ./sweep-NAME); a rerun resumes there")->type_name("DIR");
  sweep->add_option("-j,--jobs", sopts.jobs, "runs at a time, each its own process (default: one per CPU)")
      ->check(CLI::Range(1, 1024))
      ->type_name("N");
  sweep->add_flag("--retry-failed", sopts.retry_failed, "run again the runs recorded as failed or timed out");
  sweep->add_option("--timeout", sopts.timeout_s, "stop a run after SECONDS and record it as timed out")
      ->check(CLI::PositiveNumber)
      ->type_name("SECONDS");
  sweep->add_flag("--dry-run", sopts.dry_run, "list the points (with their config hash or why the config is invalid), the "
                                              "workloads and the metrics; run nothing");
  sweep->add_flag("--status", sopts.status, "show how many runs are finished, failed and left (and the Slurm job's state)");
  sweep->add_flag("-q,--quiet", sopts.quiet, "no progress on stderr");
  sweep->add_flag("--slurm", sopts.slurm, "submit the unfinished runs to Slurm as a job array (sbatch --array) and merge "
                                          "the results as they come; the results folder must be on a shared file system");
  sweep->add_flag("--no-wait", sopts.no_wait, "--slurm: print the job id and return after submitting");
  sweep->add_option("--partition", sopts.partition, "--slurm: sbatch --partition")->type_name("NAME");
  sweep->add_option("--time", sopts.time, "--slurm: sbatch --time (per array task)")->type_name("LIMIT");
  sweep->add_option("--mem", sopts.mem, "--slurm: sbatch --mem (per array task)")->type_name("SIZE");
  sweep->add_option("--array-tasks", sopts.array_tasks, "--slurm: array tasks, each a chunk of runs (default: one per "
                                                        "run, at most 64)")
      ->check(CLI::Range(1, 100000))
      ->type_name("N");
  sweep->add_option("--slurm-task", sopts.slurm_task_dir, "(the job array's tasks run this)")->group("");
  sweep->footer("Example: npusim sweep configs/sweeps/matmul_roofline.yaml -j 2, then npusim plot sweep-matmul_roofline");

  std::vector<std::string> plot_args;
  CLI::App* plot = app.add_subcommand("plot", "figures and an HTML report of a sweep's results (matplotlib; "
                                              "npusim plot RESULTS --help for its options)");
  plot->prefix_command();  // every argument goes to the plot script
  plot->set_help_flag();
  plot->allow_extras();

  // CLI11 reports an unknown first word as "A subcommand is required": name it and the ones there are.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "npusim: error: unknown subcommand '" << argv[1] << "' (there are: " << names << ")\n";
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  try {
    if (*plot) {
      plot_args = plot->remaining();
      if (plot_args.empty()) throw npusim::InputError("npusim plot RESULTS: give the folder npusim sweep wrote (--help for the options)");
      return npusim::cli::run_plot_command(plot_args);
    }
    if (*sweep) {
      for (const char* o : {"--no-wait", "--partition", "--time", "--mem", "--array-tasks"})
        if (sweep->count(o) && !sopts.slurm) throw npusim::InputError(std::string(o) + " applies to --slurm sweeps");
      return npusim::cli::run_sweep_command(sopts);
    }
    if (*run) {
      ropts.config = run_cfg.config;
      ropts.sets = run_cfg.all_sets();
      ropts.batch_given = batch_opt->count() > 0;
      ropts.prompt_len_given = prompt_opt->count() > 0;
      ropts.llm_options = decode_opt->count() || ropts.batch_given || ropts.prompt_len_given || page_opt->count() ||
                          replay_opt->count();
      return npusim::cli::run_model_command(ropts);
    }
    if (*op) {
      oopts.config = op_cfg.config;
      oopts.sets = op_cfg.all_sets();
      return npusim::cli::run_op_command(oopts);
    }
    if (*memtrace) {
      mopts.config = memtrace_cfg.config;
      mopts.sets = memtrace_cfg.sets;
      return npusim::cli::run_memtrace_command(mopts);
    }
    if (*kernel) {
      kopts.config = kernel_cfg.config;
      kopts.sets = kernel_cfg.all_sets();
      // A bare --check leaves an empty value.
      kopts.check = kernel->count("--check") > 0;
      kopts.check_refs.erase(std::remove(kopts.check_refs.begin(), kopts.check_refs.end(), std::string()),
                             kopts.check_refs.end());
      if (npusim::cli::is_kernel_file(kopts.name)) {
        if (kopts.check && kopts.check_refs.empty()) throw npusim::InputError("--check needs REF.npy (or NAME=REF.npy) for your kernel's output");
        return npusim::cli::run_user_kernel_command(kopts);
      }
      if (!kopts.check_refs.empty()) throw npusim::InputError("--check takes no file for a sample kernel (it has its CPU reference)");
      for (const char* o : {"--entry", "--block-dim", "--type", "--arg", "--tiling", "--tiling-schema", "--outputs", "--cxxflags", "--atol", "--rtol"}) {
        if (kernel->count(o)) throw npusim::InputError(std::string(o) + " applies to your own kernel (a .cpp or .so file), not to the sample " + kopts.name);
      }
      return npusim::cli::run_kernel_command(kopts);
    }
    if (*info) {
      const auto loaded = npusim::config::load_config(info_opts.config, info_opts.sets);
      const auto facts = npusim::cli::device_facts(loaded);
      if (info_json) {
        std::cout << facts.dump(2) << "\n";
      } else {
        std::cout << npusim::cli::format_device_facts(facts);
      }
    }
  } catch (const npusim::InputError& e) {
    std::cerr << "npusim: error: " << e.what() << "\n";
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "npusim: internal error: " << e.what() << "\n";
    return kExitError;
  }
  return 0;
}

// The process entry: keeps SystemC's banner off the terminal (it is printed before sc_main runs), then hands over
// to SystemC, which calls sc_main.
int main(int argc, char** argv) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  // Ctrl-C or SIGTERM: the output files being written are removed and the run stops with one line (exit 130/143).
  npusim::install_interrupt_handler();
  return sc_core::sc_elab_and_sim(argc, argv);
}
