// Shared plumbing for the example programs: command line (--data, --out), output folders, CSV, JSON,
// gnuplot scripts, and the "paper says / we measure" table each example prints and appends to its report.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnscope::examples {

/// The shared data folder when `--data` is not given: the ATTNSCOPE_DATA environment variable when set, else the
/// folder compiled in from the CMake cache variable ATTNSCOPE_DATA (default ../shared/data).
inline std::filesystem::path default_data_dir() {
  if (const char* env = std::getenv("ATTNSCOPE_DATA"); env && *env) return env;
  return ATTNSCOPE_DATA;
}

/// Command-line options common to every example: `--data DIR` (shared data), `--out DIR` (results root).
struct Options {
  std::filesystem::path data_dir = default_data_dir();
  std::filesystem::path out_dir = "results";
  bool quick = false;  // --quick: smaller problem sizes (used by tests of the examples themselves)
  std::map<std::string, std::string> extra;  // any other `--name value` pair, e.g. --capture FILE.npz

  /// Value of an extra option, or `fallback` when it was not given.
  std::string get(const std::string& name, const std::string& fallback = "") const {
    const auto it = extra.find(name);
    return it == extra.end() ? fallback : it->second;
  }
};

inline Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--data") options.data_dir = value();
    else if (arg == "--out") options.out_dir = value();
    else if (arg == "--quick") options.quick = true;
    else if (arg == "--help" || arg == "-h") {
      std::cout << "usage: " << argv[0] << " [--data DIR] [--out DIR] [--quick] [--NAME VALUE ...]\n";
      std::exit(0);
    } else if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      options.extra[arg.substr(2)] = value();
    } else throw std::runtime_error("unknown argument " + arg);
  }
  return options;
}

/// One row of the "paper says / we measure" table.
struct Claim {
  std::string claim;     // what is compared
  std::string paper;     // what the paper (or spec) says
  std::string measured;  // what we measure
  std::string verdict;   // "agrees", "disagrees: why", "partly: why", ...
};

/// Collects an example's outputs under <out>/<module>/ and writes its report fragment <name>.md there.
class Report {
 public:
  Report(const Options& options, std::string module, std::string name, std::string title)
      : dir_(options.out_dir / module), name_(std::move(name)), title_(std::move(title)) {
    std::filesystem::create_directories(dir_);
    start_ = std::chrono::steady_clock::now();
  }

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path(const std::string& file) const { return dir_ / file; }

  /// Free text (Markdown) appended to the report fragment.
  void text(const std::string& markdown) { body_ << markdown << "\n\n"; }

  /// Records a claim; printed on stdout and in the fragment's table.
  void claim(Claim c) { claims_.push_back(std::move(c)); }

  /// Writes a JSON file into the module folder.
  void json(const std::string& file, const nlohmann::json& value) const {
    std::ofstream out(path(file));
    out << value.dump(2) << "\n";
  }

  /// Writes a gnuplot script that renders <png>; ./scripts/reproduce.sh runs every *.gp in results/.
  /// The script runs with the module folder as working directory.
  void figure(const std::string& png, const std::string& gnuplot_commands, const std::string& caption) {
    std::ofstream gp(path(png.substr(0, png.rfind('.')) + ".gp"));
    gp << "set terminal pngcairo size 900,600 noenhanced\n"
       << "set output '" << png << "'\n"
       << gnuplot_commands << "\n";
    body_ << "![" << caption << "](" << dir_.filename().string() << "/" << png << ")\n\n*" << caption << "*\n\n";
  }

  /// Prints the claims table and writes <name>.md; call once at the end.
  void finish() {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::ostringstream table;
    if (!claims_.empty()) {
      table << "| claim | paper's value | our value | verdict |\n|---|---|---|---|\n";
      for (const auto& c : claims_)
        table << "| " << cell(c.claim) << " | " << cell(c.paper) << " | " << cell(c.measured) << " | "
              << cell(c.verdict) << " |\n";
      table << "\n";
      // The same claims as tab-separated lines (claim, paper, measured, verdict) for ./scripts/reproduce.sh, which
      // joins the runs of one program on several models into one verdict table with a column per model.
      std::ofstream tsv(path(name_ + ".claims.tsv"));
      for (const auto& c : claims_)
        tsv << cell(c.claim) << '\t' << cell(c.paper) << '\t' << cell(c.measured) << '\t' << cell(c.verdict) << '\n';
    }
    std::cout << "== " << title_ << " ==\n";
    for (const auto& c : claims_)
      std::cout << "- " << c.claim << "\n    paper says: " << c.paper << "\n    we measure: " << c.measured
                << "\n    verdict:    " << c.verdict << "\n";
    std::cout << "(" << std::fixed << std::setprecision(2) << seconds << " s)\n";
    std::ofstream md(path(name_ + ".md"));
    md << "### " << title_ << "\n\n" << table.str() << body_.str() << "_Program `" << name_ << "`, "
       << std::fixed << std::setprecision(2) << seconds << " s._\n\n";
  }

 private:
  /// A Markdown table cell (and TSV field): '|' escaped, line breaks and tabs as spaces.
  static std::string cell(const std::string& text) {
    std::string out;
    for (char ch : text) {
      if (ch == '|') out += "\\|";
      else out += (ch == '\n' || ch == '\t') ? ' ' : ch;
    }
    return out;
  }

  std::filesystem::path dir_;
  std::string name_, title_;
  std::ostringstream body_;
  std::vector<Claim> claims_;
  std::chrono::steady_clock::time_point start_;
};

/// Minimal CSV writer: header then rows of numbers or strings.
class Csv {
 public:
  Csv(const std::filesystem::path& file, const std::vector<std::string>& header) : out_(file) {
    out_ << std::setprecision(10);
    for (std::size_t i = 0; i < header.size(); ++i) out_ << (i ? "," : "") << header[i];
    out_ << "\n";
  }
  template <class... Values>
  void row(const Values&... values) {
    std::size_t i = 0;
    ((out_ << (i++ ? "," : "") << values), ...);
    out_ << "\n";
  }

 private:
  std::ofstream out_;
};

/// Formats a number with the given significant digits.
inline std::string format(double value, int digits = 4) {
  std::ostringstream s;
  s << std::setprecision(digits) << value;
  return s.str();
}

}  // namespace attnscope::examples
