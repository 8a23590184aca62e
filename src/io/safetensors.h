// safetensors files (https://github.com/huggingface/safetensors format): an 8-byte little-endian
// header length, a JSON header mapping names to {dtype, shape, data_offsets}, then raw data.
// crossover reads and writes float32 tensors with PyTorch's state_dict names and shapes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace xo {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;    // row-major, product(shape) elements
  std::string dtype = "F32";  // as written: "F32", or "I64" for counts (values must be integers)
};

// Writes the tensors (in the order given; offsets contiguous, header padded with spaces to a
// multiple of 8 bytes) and optional "__metadata__" string map, atomically.
void save_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor. Accepts F32 (and converts F64, F16, BF16 and I64 to float32; I64 tensors say
// so in dtype). Throws UserError naming the file (and tensor) for: a missing/truncated file, a
// header length past the end, invalid JSON, unknown dtype, shape/offset mismatch, overlapping or
// out-of-bounds data offsets.
std::vector<NamedTensor> load_safetensors(const std::filesystem::path& path);

// The same in memory: the file's bytes, and the tensors of a file's bytes (`name` in messages).
std::string encode_safetensors(const std::vector<NamedTensor>& tensors,
                               const std::map<std::string, std::string>& metadata,
                               const std::string& name);
std::vector<NamedTensor> decode_safetensors(const std::string& file, const std::string& name);

// A tensor of a file's bytes as the file holds it, checked as decode_safetensors checks it but not
// converted: its dtype's name ("F32", "F64", "F16", "BF16" or "I64"), its shape and its bytes
// inside the file's (little-endian, aligned as the file aligns them).
struct TensorBytes {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  std::string_view bytes;
};
// The tensors of a file's bytes in the order of their data, without a copy (a file mapped whole:
// core/file.h, MappedFile); throws as decode_safetensors throws.
std::vector<TensorBytes> index_safetensors(std::string_view file, const std::string& name);
// A tensor's numbers as float32, converted as load_safetensors converts them.
std::vector<float> tensor_floats(const TensorBytes& t);

}  // namespace xo
