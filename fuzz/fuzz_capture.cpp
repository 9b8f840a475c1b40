// libFuzzer target: the capture reader (analysis::AttentionFile over io::ArrayFile) on arbitrary bytes written as a
// file, then every head read and analysed by the report's standard columns (leniently: rows that are not
// distributions are counted, not refused). Only attnscope::io_error and attnscope::invalid_argument may escape; the
// report must have one row per head.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "attnscope/analysis.hpp"
#include "attnscope/analysis/capture.hpp"
#include "fuzz_file_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = attnscope_fuzz::write_scratch_file("capture.bin", data, size);
  try {
    const attnscope::analysis::AttentionFile file(path);
    attnscope::analysis::HeadReportOptions options;
    options.lenient = true;
    attnscope::analysis::HeadReportBuilder builder(attnscope::analysis::default_report_columns(), options);
    std::size_t heads = 0;
    for (const auto& location : file.heads()) {
      builder.add(file.head(location));
      ++heads;
    }
    if (builder.take().rows.size() != heads) std::abort();
  } catch (const attnscope::io_error&) {
  } catch (const attnscope::invalid_argument&) {
  }
  return 0;
}
