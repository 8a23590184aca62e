// safetensors read/write: an 8-byte little-endian header length, a JSON header, then raw data.
#include "io/safetensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.h"
#include "core/file.h"
#include "core/json_depth.h"

namespace xo {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr size_t kHeaderLengthBytes = 8;
constexpr size_t kHeaderAlignment = 8;
// A header larger than this is not a weights file (the format's reference reader uses 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
// The optional string-to-string map that the format reserves beside the tensors.
constexpr std::string_view kMetadataKey = "__metadata__";

// IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits; float: 1, 8 (bias 127), 23. Every
// half value is exactly a float, so the conversion moves bits and never rounds.
constexpr int kHalfMantissaBits = 10;
constexpr int kFloatMantissaBits = 23;
constexpr uint32_t kHalfExponentMask = 0x1f;
constexpr uint32_t kHalfMantissaMask = (1u << kHalfMantissaBits) - 1;
constexpr uint32_t kHalfSignBit = 0x8000;
constexpr uint32_t kFloatExponentAllOnes = 0xffu << kFloatMantissaBits;
constexpr uint32_t kExponentBiasDifference = 127 - 15;
constexpr int kMantissaShift = kFloatMantissaBits - kHalfMantissaBits;
constexpr int kHalfToFloatSignShift = 16;

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & kHalfSignBit) << kHalfToFloatSignShift;
  const uint32_t exponent = (h >> kHalfMantissaBits) & kHalfExponentMask;
  uint32_t mantissa = h & kHalfMantissaMask;
  uint32_t bits;
  if (exponent == kHalfExponentMask) {
    bits = sign | kFloatExponentAllOnes | (mantissa << kMantissaShift);  // inf or nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + kExponentBiasDifference) << kFloatMantissaBits) |
           (mantissa << kMantissaShift);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half (mantissa * 2^-24): shift the leading 1 up to the implicit bit, lowering the
    // exponent by one per shift, starting from the exponent of the smallest normal half.
    uint32_t e = kExponentBiasDifference + 1;
    while ((mantissa & (1u << kHalfMantissaBits)) == 0) {
      mantissa <<= 1;
      --e;
    }
    bits = sign | (e << kFloatMantissaBits) | ((mantissa & kHalfMantissaMask) << kMantissaShift);
  }
  return std::bit_cast<float>(bits);
}

// bfloat16 is the top half of a float32.
float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

enum class DType { kF32, kF64, kF16, kBF16, kI64 };

struct DTypeInfo {
  const char* name;
  DType dtype;
  size_t bytes;
};

// The dtypes crossover reads (I64 for counts such as BatchNorm's num_batches_tracked); every other
// dtype of the format is refused by name.
constexpr DTypeInfo kDTypes[] = {{"F32", DType::kF32, sizeof(float)},
                                 {"F64", DType::kF64, sizeof(double)},
                                 {"F16", DType::kF16, sizeof(uint16_t)},
                                 {"BF16", DType::kBF16, sizeof(uint16_t)},
                                 {"I64", DType::kI64, sizeof(int64_t)}};

const DTypeInfo* find_dtype(const std::string& name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

// Converts n little-endian elements of `dtype` at p to float.
void convert(DType dtype, const char* p, size_t n, float* out) {
  if (n == 0) return;  // `out` may be null then, which memcpy does not allow
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, p, n * sizeof(float));
      return;
    case DType::kF64:
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + i * sizeof(double), sizeof(double));
        out[i] = static_cast<float>(v);
      }
      return;
    case DType::kI64:
      for (size_t i = 0; i < n; ++i) {
        int64_t v;
        std::memcpy(&v, p + i * sizeof(int64_t), sizeof(int64_t));
        out[i] = static_cast<float>(v);
      }
      return;
    case DType::kF16:
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + i * sizeof(uint16_t), sizeof(uint16_t));
        out[i] = dtype == DType::kF16 ? half_to_float(h) : bf16_to_float(h);
      }
      return;
  }
}

// Reads a JSON array of non-negative integers into `out`; false if `v` is anything else (a
// negative or fractional number would otherwise be wrapped or truncated by nlohmann's get).
bool get_unsigned_array(const nlohmann::ordered_json& v, std::vector<uint64_t>& out) {
  if (!v.is_array()) return false;
  out.clear();
  for (const nlohmann::ordered_json& e : v) {
    if (!e.is_number_unsigned()) return false;
    out.push_back(e.get<uint64_t>());
  }
  return true;
}

constexpr const char* kEntryForm =
    R"({"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]})";

}  // namespace

std::string encode_safetensors(const std::vector<NamedTensor>& tensors,
                               const std::map<std::string, std::string>& metadata,
                               const std::string& name) {
  // An object from the start: with no tensors and no metadata a default (null) value would be
  // written as "null", a header every reader refuses (found by fuzz_safetensors).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    // A repeated name would overwrite the earlier entry and orphan its data; "__metadata__" is
    // skipped by every reader. Both are caller bugs, not bad input.
    if (t.name == kMetadataKey || header.contains(t.name)) {
      throw_internal("unique tensor names", fmt::format("tensor '{}' for {}", t.name, name),
                     __FILE__, __LINE__);
    }
    int64_t n = 1;
    for (int64_t d : t.shape) {
      XO_ASSERT(d >= 0);
      n *= d;
    }
    XO_ASSERT(n == static_cast<int64_t>(t.data.size()));
    XO_ASSERT(t.dtype == "F32" || t.dtype == "I64");
    const size_t bytes = (t.dtype == "I64" ? sizeof(int64_t) : sizeof(float)) * t.data.size();
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  // Pad with spaces so that the data starts 8-byte aligned, as the format recommends.
  json.append(
      (kHeaderAlignment - (kHeaderLengthBytes + json.size()) % kHeaderAlignment) % kHeaderAlignment,
      ' ');
  std::string file(kHeaderLengthBytes, '\0');
  const uint64_t len = json.size();
  std::memcpy(file.data(), &len, sizeof(len));
  file += json;
  file.reserve(file.size() + offset);
  for (const NamedTensor& t : tensors) {
    if (t.dtype == "I64") {
      for (float v : t.data) {
        // A count read from a file may be any float: saturate rather than convert out of range
        // (undefined behaviour; found by the fuzzer). 2^63 as a float is the first one past.
        constexpr float kPastInt64 = 9223372036854775808.0f;
        const int64_t i = std::isnan(v)     ? 0
                          : v >= kPastInt64 ? std::numeric_limits<int64_t>::max()
                          : v < -kPastInt64 ? std::numeric_limits<int64_t>::min()
                                            : static_cast<int64_t>(v);
        file.append(reinterpret_cast<const char*>(&i), sizeof(i));
      }
      continue;
    }
    file.append(reinterpret_cast<const char*>(t.data.data()), sizeof(float) * t.data.size());
  }
  return file;
}

void save_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(tensors, metadata, path.string()));
}

std::vector<NamedTensor> load_safetensors(const std::filesystem::path& path) {
  return decode_safetensors(read_file(path), path.string());
}

namespace {

// One tensor's header entry, checked against the data.
struct HeaderEntry {
  std::string name;
  const DTypeInfo* dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

// The 8-byte header length, checked against the file, and the JSON header it gives.
nlohmann::ordered_json read_header(std::string_view file, const std::string& name, uint64_t& len) {
  if (file.size() < kHeaderLengthBytes) {
    throw UserError(
        fmt::format("{}: {} bytes is too short for a safetensors file (expected an 8-byte "
                    "header length, a JSON header, then data)",
                    name, file.size()));
  }
  std::memcpy(&len, file.data(), sizeof(len));
  if (len > file.size() - kHeaderLengthBytes) {
    throw UserError(
        fmt::format("{}: header length {} runs past the end of the file ({} bytes): "
                    "truncated, or not a safetensors file",
                    name, len, file.size()));
  }
  if (len > kMaxHeaderBytes) {
    throw UserError(
        fmt::format("{}: header length {} is implausibly large (expected at most {} bytes): not a "
                    "safetensors file",
                    name, len, kMaxHeaderBytes));
  }
  // Ordered, so that tensors sharing an offset (empty ones) come back in the file's order.
  const std::string_view header_text = file.substr(kHeaderLengthBytes, len);
  check_json_depth(header_text, name + " (header)");
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: header is not valid JSON: {}", name, e.what()));
  }
  if (!header.is_object()) {
    throw UserError(fmt::format("{}: header is not a JSON object (expected {{\"name\": {}, ...}})",
                                name, kEntryForm));
  }
  return header;
}

// The shape's bytes must be the bytes its data_offsets hold, inside the data. The element count
// is computed in bytes with overflow checks: a forged shape must not wrap around to match the
// data size.
void check_extent(HeaderEntry& e, const std::vector<uint64_t>& dims, const std::string& dtype_name,
                  const std::string& where, size_t data_size) {
  // A zero dimension makes the tensor empty however large the others are.
  const bool empty = std::find(dims.begin(), dims.end(), 0) != dims.end();
  uint64_t needed = empty ? 0 : e.dtype->bytes;
  bool overflow = false;
  for (uint64_t d : dims) {
    overflow = overflow || d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
               (!empty && __builtin_mul_overflow(needed, d, &needed));
    e.shape.push_back(static_cast<int64_t>(d));
  }
  if (overflow) {
    throw UserError(
        fmt::format("{}: shape [{}] is too large (expected a tensor that fits in {} "
                    "data bytes)",
                    where, fmt::join(dims, ", "), data_size));
  }
  if (e.end < e.begin || e.end > data_size) {
    throw UserError(fmt::format(
        "{}: data_offsets [{}, {}] lie outside the {} data bytes (expected begin <= end <= {})",
        where, e.begin, e.end, data_size, data_size));
  }
  if (e.end - e.begin != needed) {
    throw UserError(fmt::format(
        "{}: data_offsets [{}, {}] hold {} bytes but shape [{}] of {} "
        "needs {}",
        where, e.begin, e.end, e.end - e.begin, fmt::join(dims, ", "), dtype_name, needed));
  }
}

// One entry of the header: its dtype, shape and data_offsets, each checked. `dims` and `offsets`
// are scratch space shared by the entries.
HeaderEntry read_entry(const std::string& key, const nlohmann::ordered_json& v,
                       const std::string& name, size_t data_size, std::vector<uint64_t>& dims,
                       std::vector<uint64_t>& offsets) {
  const std::string where = fmt::format("{}: tensor '{}'", name, key);
  const auto malformed = [&](std::string_view what) {
    return UserError(fmt::format("{}: {} (expected {})", where, what, kEntryForm));
  };
  if (!v.is_object()) throw malformed("entry is not a JSON object");
  const auto dtype_it = v.find("dtype");
  const auto shape_it = v.find("shape");
  const auto offsets_it = v.find("data_offsets");
  if (dtype_it == v.end() || !dtype_it->is_string()) throw malformed("no string \"dtype\"");
  if (shape_it == v.end() || !get_unsigned_array(*shape_it, dims)) {
    throw malformed("no \"shape\" of non-negative integers");
  }
  if (offsets_it == v.end() || !get_unsigned_array(*offsets_it, offsets) || offsets.size() != 2) {
    throw malformed("no \"data_offsets\" pair of non-negative integers");
  }
  const std::string dtype_name = dtype_it->get<std::string>();
  const DTypeInfo* dtype = find_dtype(dtype_name);
  if (dtype == nullptr) {
    throw UserError(
        fmt::format("{}: dtype '{}' is not supported (expected F32, F64, F16, BF16 or I64)", where,
                    dtype_name));
  }
  HeaderEntry e{key, dtype, {}, offsets[0], offsets[1]};
  check_extent(e, dims, dtype_name, where, data_size);
  return e;
}

// Sorts the entries by offset and refuses two whose data overlap.
void sort_disjoint(std::vector<HeaderEntry>& entries, const std::string& name) {
  // Stable, so that tensors sharing an offset (empty ones) keep the file's order.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const HeaderEntry& a, const HeaderEntry& b) { return a.begin < b.begin; });
  // An empty tensor occupies no bytes and overlaps nothing, wherever its offsets point.
  const HeaderEntry* previous = nullptr;
  for (const HeaderEntry& e : entries) {
    if (e.begin == e.end) continue;
    if (previous != nullptr && e.begin < previous->end) {
      throw UserError(fmt::format(
          "{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap (expected disjoint data_offsets)",
          name, previous->name, previous->begin, previous->end, e.name, e.begin, e.end));
    }
    previous = &e;
  }
}

}  // namespace

std::vector<TensorBytes> index_safetensors(std::string_view file, const std::string& name) {
  uint64_t len = 0;
  const nlohmann::ordered_json header = read_header(file, name, len);
  const size_t data_start = kHeaderLengthBytes + len;
  const size_t data_size = file.size() - data_start;
  std::vector<HeaderEntry> entries;
  std::vector<uint64_t> dims, offsets;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) continue;
    entries.push_back(read_entry(it.key(), it.value(), name, data_size, dims, offsets));
  }
  sort_disjoint(entries, name);
  std::vector<TensorBytes> out;
  out.reserve(entries.size());
  for (HeaderEntry& e : entries) {
    out.push_back({std::move(e.name), std::move(e.shape), e.dtype->name,
                   file.substr(data_start + e.begin, e.end - e.begin)});
  }
  return out;
}

std::vector<float> tensor_floats(const TensorBytes& t) {
  const DTypeInfo* dtype = find_dtype(t.dtype);
  XO_ASSERT(dtype != nullptr);  // index_safetensors names only these
  std::vector<float> out(t.bytes.size() / dtype->bytes);
  convert(dtype->dtype, t.bytes.data(), out.size(), out.data());
  return out;
}

std::vector<NamedTensor> decode_safetensors(const std::string& file, const std::string& name) {
  std::vector<NamedTensor> out;
  for (TensorBytes& t : index_safetensors(file, name)) {
    std::vector<float> data = tensor_floats(t);
    out.push_back(
        {std::move(t.name), std::move(t.shape), std::move(data), t.dtype == "I64" ? "I64" : "F32"});
  }
  return out;
}

}  // namespace xo
