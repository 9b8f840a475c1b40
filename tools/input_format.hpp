// tools/input_format.hpp — the input check shared by `report`, `capture` and `normalize`: the format of an input file
// is decided by its content (io::detect_file_format), never its extension, and a file the command cannot read gets a
// message saying what it is and what to do (a torch.save archive: how to convert it with NumPy).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/io/detect_format.hpp"

namespace attnscope::cli {

/// How to turn a PyTorch tensor into a file attnscope reads.
inline constexpr const char* torch_save_advice =
    "attnscope reads NumPy (.npy/.npz) and safetensors files, not pickles: in Python, save the tensor with "
    "np.save(path, t.detach().cpu().numpy()) (several: np.savez(path, attention=..., scores=..., v=...))";

/// The format of `path` when it is one of `accepted`; otherwise throws attnscope::io_error (exit code 1) naming the
/// path: "not <expected>: PATH (it is a …)", with the conversion advice for a torch.save archive.
inline io::FileFormat require_input_format(const char* command, const std::string& path,
                                           const std::vector<io::FileFormat>& accepted, const std::string& expected) {
  const io::FileFormat format = io::detect_file_format(path);
  if (std::find(accepted.begin(), accepted.end(), format) != accepted.end()) return format;
  if (format == io::FileFormat::torch_save)
    attnscope::detail::throw_io_error(command, path, "is a PyTorch torch.save archive (a ZIP holding data.pkl). ",
                                      torch_save_advice);
  attnscope::detail::throw_io_error(command, path, "not ", expected, ": it is a ", io::file_format_name(format),
                                    " (the format is read from the content, not the extension)");
}

}  // namespace attnscope::cli
