#include "cli/plot_command.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/util/error.hpp"
#include "common/util/self_exe.hpp"

namespace npusim::cli {

namespace fs = std::filesystem;

namespace {

// The script: $NPUSIM_PLOT_SCRIPT, else beside an installed binary (PREFIX/share/npusim), else the source tree
// this binary was built from.
std::string plot_script() {
  if (const char* env = std::getenv("NPUSIM_PLOT_SCRIPT")) return env;
  std::error_code ec;
  if (const fs::path exe = self_executable(); !exe.empty()) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "npusim" / "npusim_plot.py";
    if (fs::exists(installed, ec)) return installed.string();
  }
  if (fs::exists(NPUSIM_PLOT_SCRIPT_SOURCE, ec)) return NPUSIM_PLOT_SCRIPT_SOURCE;
  throw InputError("npusim plot: cannot find npusim_plot.py (set NPUSIM_PLOT_SCRIPT to its path)");
}

// The interpreter: $NPUSIM_PYTHON, else the project's venv this binary was configured with, else python3.
std::string plot_python() {
  if (const char* env = std::getenv("NPUSIM_PYTHON")) return env;
  std::error_code ec;
  if (fs::exists(NPUSIM_PLOT_PYTHON, ec)) return NPUSIM_PLOT_PYTHON;
  return "python3";
}

}  // namespace

int run_plot_command(const std::vector<std::string>& args) {
  std::vector<std::string> all = {plot_python(), plot_script()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  throw InputError("npusim plot: cannot start " + all[0] + ": " + std::strerror(errno) +
                   " (set NPUSIM_PYTHON to a Python with matplotlib; scripts/setup.sh makes .venv/)");
}

}  // namespace npusim::cli
