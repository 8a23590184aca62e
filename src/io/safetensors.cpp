// safetensors read/write: an 8-byte little-endian header length, a JSON header, then raw data.
#include "io/safetensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file.h"

namespace xo {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr size_t kHeaderLengthBytes = 8;
constexpr size_t kHeaderAlignment = 8;
// A header larger than this is not a weights file (the format's reference reader uses 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf or nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalise the mantissa into a float exponent.
    int e = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

size_t dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F64") return 8;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    XO_ASSERT(n == static_cast<int64_t>(t.data.size()));
    const size_t bytes = sizeof(float) * t.data.size();
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
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
    file.append(reinterpret_cast<const char*>(t.data.data()), sizeof(float) * t.data.size());
  }
  write_file_atomic(path, file);
}

std::vector<NamedTensor> load_safetensors(const std::filesystem::path& path) {
  const std::string file = read_file(path);
  const std::string name = path.string();
  if (file.size() < kHeaderLengthBytes) {
    throw UserError(
        fmt::format("{}: {} bytes is too short for a safetensors file (needs an 8-byte "
                    "header length)",
                    name, file.size()));
  }
  uint64_t len;
  std::memcpy(&len, file.data(), sizeof(len));
  if (len > kMaxHeaderBytes || len > file.size() - kHeaderLengthBytes) {
    throw UserError(
        fmt::format("{}: header length {} runs past the end of the file ({} bytes): "
                    "truncated, or not a safetensors file",
                    name, len, file.size()));
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file.substr(kHeaderLengthBytes, len));
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(fmt::format("{}: header is not valid JSON: {}", name, e.what()));
  }
  if (!header.is_object()) throw UserError(fmt::format("{}: header is not a JSON object", name));
  const size_t data_start = kHeaderLengthBytes + len;
  const size_t data_size = file.size() - data_start;
  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = it.value();
    const std::string where = fmt::format("{}: tensor '{}'", name, it.key());
    try {
      Entry e{it.key(), v.at("dtype").get<std::string>(), v.at("shape").get<std::vector<int64_t>>(),
              v.at("data_offsets").at(0).get<uint64_t>(),
              v.at("data_offsets").at(1).get<uint64_t>()};
      if (v.at("data_offsets").size() != 2) throw std::out_of_range("data_offsets");
      entries.push_back(std::move(e));
    } catch (const nlohmann::json::exception& ex) {
      throw UserError(
          fmt::format("{}: expected {{\"dtype\", \"shape\", \"data_offsets\": [begin, "
                      "end]}}: {}",
                      where, ex.what()));
    }
    const Entry& e = entries.back();
    const size_t elem = dtype_size(e.dtype);
    if (elem == 0) {
      throw UserError(fmt::format(
          "{}: dtype '{}' is not supported (expected F32, F64, F16 or BF16)", where, e.dtype));
    }
    uint64_t n = 1;
    for (int64_t d : e.shape) {
      if (d < 0)
        throw UserError(
            fmt::format("{}: negative dimension in shape [{}]", where, fmt::join(e.shape, ", ")));
      n *= static_cast<uint64_t>(d);
    }
    if (e.end < e.begin || e.end > data_size) {
      throw UserError(fmt::format("{}: data_offsets [{}, {}] lie outside the {} data bytes", where,
                                  e.begin, e.end, data_size));
    }
    if (e.end - e.begin != n * elem) {
      throw UserError(fmt::format(
          "{}: data_offsets [{}, {}] hold {} bytes but shape [{}] of {} "
          "needs {}",
          where, e.begin, e.end, e.end - e.begin, fmt::join(e.shape, ", "), e.dtype, n * elem));
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].begin < entries[i - 1].end) {
      throw UserError(fmt::format("{}: tensors '{}' and '{}' overlap", name, entries[i - 1].name,
                                  entries[i].name));
    }
  }
  std::vector<NamedTensor> out;
  for (const Entry& e : entries) {
    NamedTensor t{e.name, e.shape, {}};
    const char* p = file.data() + data_start + e.begin;
    const size_t n = (e.end - e.begin) / dtype_size(e.dtype);
    t.data.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (e.dtype == "F32") {
        std::memcpy(&t.data[i], p + 4 * i, 4);
      } else if (e.dtype == "F64") {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        t.data[i] = static_cast<float>(v);
      } else {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        t.data[i] = e.dtype == "F16" ? half_to_float(h) : bf16_to_float(h);
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace xo
