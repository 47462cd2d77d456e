// `npusim plot RESULTS`: figures and an HTML report of a sweep's results (docs/exploration.md). The drawing is
// matplotlib's, in cli/plot/npusim_plot.py, run with the project's Python (the venv scripts/setup.sh makes).
#pragma once

#include <string>
#include <vector>

namespace npusim::cli {

// Replaces the process with the plot script given `args`; returns only on failure (an InputError is thrown).
int run_plot_command(const std::vector<std::string>& args);

}  // namespace npusim::cli
