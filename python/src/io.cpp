// Bindings of attnscope::io: NPY, NPZ and safetensors reading and writing. Arrays read from files are handed to
// numpy without a copy (the io::Array's bytes are owned by the returned array); bfloat16 tensors, which numpy has no
// dtype for, are widened to float32 (exact). Files that cannot be read raise OSError with the C++ message.
#include <attnscope/io.hpp>

#include "arrays.hpp"
#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;
namespace io = attnscope::io;

namespace {

py::dtype numpy_dtype(io::DType dtype) {
  switch (dtype) {
    case io::DType::float32: return py::dtype("<f4");
    case io::DType::float64: return py::dtype("<f8");
    case io::DType::int32: return py::dtype("<i4");
    case io::DType::int64: return py::dtype("<i8");
    case io::DType::boolean: return py::dtype("?");
    case io::DType::float16: return py::dtype("<f2");
    case io::DType::uint8: return py::dtype("|u1");
    case io::DType::bfloat16: break;
  }
  return py::dtype("<f4");
}

io::NamedArrays named_arrays(const py::dict& arrays, const char* function) {
  io::NamedArrays out;
  for (const auto& item : arrays) out.emplace_back(item.first.cast<std::string>(), from_numpy(item.second, function));
  return out;
}

py::dict to_dict(io::NamedArrays arrays) {
  py::dict out;
  for (auto& [name, array] : arrays) out[py::str(name)] = to_numpy(std::move(array));
  return out;
}

}  // namespace

/// An io::Array as a numpy array that owns it (no copy); bfloat16 becomes float32.
py::array to_numpy(io::Array array) {
  if (array.dtype() == io::DType::bfloat16)
    array = io::Array::from_vector(array.to_vector<float>(), array.shape());
  const Shape shape(array.shape().begin(), array.shape().end());
  const py::dtype dtype = numpy_dtype(array.dtype());
  auto* owned = new io::Array(std::move(array));
  py::capsule owner(owned, [](void* pointer) { delete static_cast<io::Array*>(pointer); });
  return py::array(dtype, shape, owned->bytes().data(), owner);
}

/// A numpy array (C order, any of the supported dtypes) as an io::Array (one copy of the bytes).
io::Array from_numpy(const py::handle& object, const char* function) {
  const py::array input = as_array(object, function, "array");
  const py::array array = py::module_::import("numpy").attr("require")(input, py::none(), "C");  // keeps rank 0
  const py::dtype dtype = array.dtype();
  io::DType kind;
  const char code = dtype.kind();
  const auto size = dtype.itemsize();
  if (code == 'f' && size == 4)
    kind = io::DType::float32;
  else if (code == 'f' && size == 8)
    kind = io::DType::float64;
  else if (code == 'f' && size == 2)
    kind = io::DType::float16;
  else if (code == 'i' && size == 4)
    kind = io::DType::int32;
  else if (code == 'i' && size == 8)
    kind = io::DType::int64;
  else if (code == 'b')
    kind = io::DType::boolean;
  else
    throw_value_error(function, "unsupported dtype " + py::str(static_cast<const py::handle&>(dtype)).cast<std::string>() +
                                    " (float16/32/64, int32/64 and bool are supported)");
  if (dtype.attr("byteorder").cast<std::string>() == ">")
    throw_value_error(function, "big-endian arrays are not supported");
  const auto* begin = static_cast<const unsigned char*>(array.data());
  std::vector<unsigned char> bytes(begin, begin + array.nbytes());
  std::vector<std::int64_t> shape(array.shape(), array.shape() + array.ndim());
  return io::Array(kind, std::move(shape), std::move(bytes));
}

void bind_io(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "io", "attnscope::io: NPY, NPZ and safetensors files (OSError on missing, truncated or corrupt files).");

  m.def("read_npy", [](const PathArgument& path) { return to_numpy(io::read_npy(path.string())); }, "path"_a,
        "Reads a .npy file (versions 1-3, C or Fortran order; <f4 <f8 <i4 <i8 |b1 <f2) into a new numpy array.\n"
        "Raises OSError naming the file and the problem.");
  m.def(
      "write_npy",
      [](const PathArgument& path, const py::object& array, bool fortran_order) {
        io::write_npy(path.string(), from_numpy(array, "io.write_npy"), fortran_order);
      },
      "path"_a, "array"_a, "fortran_order"_a = false,
      "Writes what numpy's np.save writes (byte for byte, version 1.0). Raises ValueError for unsupported dtypes,\n"
      "OSError when the file cannot be written.");
  m.def("read_npz", [](const PathArgument& path) { return to_dict(io::read_npz_ordered(path.string())); }, "path"_a,
        "Reads a .npz archive (stored or deflated members, CRC-checked) into a dict name -> array, in archive order.");
  m.def(
      "write_npz",
      [](const PathArgument& path, const py::dict& arrays, bool compressed) {
        io::write_npz(path.string(), named_arrays(arrays, "io.write_npz"),
                      compressed ? io::Compression::deflated : io::Compression::stored);
      },
      "path"_a, "arrays"_a, "compressed"_a = true,
      "Writes a dict name -> array as .npz (deflated like np.savez_compressed, or stored like np.savez).");
  m.def(
      "read_safetensors",
      [](const PathArgument& path) {
        io::SafetensorsContents contents = io::read_safetensors_contents(path.string());
        return py::make_tuple(to_dict(std::move(contents.tensors)), contents.metadata);
      },
      "path"_a,
      "Reads a .safetensors file: returns (tensors, metadata), tensors a dict name -> array in buffer order (BF16 is\n"
      "widened to float32, F16 stays float16), metadata a dict of strings.");
  m.def(
      "write_safetensors",
      [](const PathArgument& path, const py::dict& tensors, const std::map<std::string, std::string>& metadata) {
        io::write_safetensors(path.string(), named_arrays(tensors, "io.write_safetensors"), metadata);
      },
      "path"_a, "tensors"_a, "metadata"_a = std::map<std::string, std::string>(),
      "Writes a dict name -> array (and optional string metadata) as safetensors.");
}

}  // namespace attnscope_python
