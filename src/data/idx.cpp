#include "data/idx.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "core/file.h"

namespace xo {
namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;
constexpr int kClasses = 10;
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};
// Deflate never compresses better than about 1032:1, so a larger size in a gzip trailer is a lie.
constexpr uint64_t kMaxDeflateRatio = 1032;

bool starts_with_gzip_magic(const std::string& bytes, size_t at) {
  return bytes.size() >= at + 2 && static_cast<unsigned char>(bytes[at]) == kGzipMagic[0] &&
         static_cast<unsigned char>(bytes[at + 1]) == kGzipMagic[1];
}

// The file's bytes, inflated when it starts with the gzip magic. Concatenated gzip members are
// joined, as gunzip does.
std::string read_maybe_gzip(const std::filesystem::path& path) {
  std::string raw = read_file(path);
  if (!starts_with_gzip_magic(raw, 0)) return raw;
  z_stream z{};
  // 16 + MAX_WBITS: expect a gzip header.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    throw UserError(fmt::format("{}: cannot start gzip decompression", path.string()));
  }
  // The trailer's last 4 bytes hold the inflated size (mod 2^32): one allocation for real files.
  uint64_t size_hint = 0;
  for (size_t i = 0; i < 4 && raw.size() >= 4; ++i) {
    size_hint = (size_hint << 8) | static_cast<unsigned char>(raw[raw.size() - 1 - i]);
  }
  std::string out;
  out.resize(std::min<uint64_t>(size_hint, raw.size() * kMaxDeflateRatio) + 1);
  z.next_in = reinterpret_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  auto fail = [&](const std::string& why) {
    inflateEnd(&z);
    throw UserError(fmt::format("{}: {}", path.string(), why));
  };
  size_t done = 0;  // not z.total_out: inflateReset clears it
  for (;;) {
    if (done == out.size()) out.resize(out.size() * 2);
    const auto room = static_cast<uInt>(std::min<size_t>(out.size() - done, UINT32_MAX));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + done);
    z.avail_out = room;
    const int status = inflate(&z, Z_NO_FLUSH);
    done += room - z.avail_out;
    if (status == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      const size_t at = raw.size() - z.avail_in;
      if (!starts_with_gzip_magic(raw, at)) {
        fail(fmt::format("corrupt gzip data ({} unexpected bytes after the compressed stream)",
                         z.avail_in));
      }
      inflateReset(&z);
      continue;
    }
    if (status == Z_BUF_ERROR && z.avail_in == 0) {
      fail("truncated gzip stream (it ends before its end marker)");
    }
    if (status != Z_OK && status != Z_BUF_ERROR) {
      fail(fmt::format("corrupt gzip data ({})", z.msg ? z.msg : "invalid data"));
    }
  }
  out.resize(done);
  inflateEnd(&z);
  return out;
}

uint32_t big_endian(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// Checks the magic and that the body holds exactly what the header says; returns the body's
// offset. Three 32-bit dimensions can multiply past 64 bits, so the product is checked as it grows.
size_t check_header(const std::string& bytes, const std::filesystem::path& path, uint32_t magic,
                    size_t dims, uint64_t* counts) {
  const size_t header = 4 + 4 * dims;
  if (bytes.size() < header) {
    throw UserError(fmt::format("{}: truncated: {} bytes, shorter than the {}-byte IDX header",
                                path.string(), bytes.size(), header));
  }
  if (big_endian(bytes, 0) != magic) {
    throw UserError(fmt::format("{}: not an IDX {} file: magic number 0x{:08x}, expected 0x{:08x}",
                                path.string(), magic == kImageMagic ? "image" : "label",
                                big_endian(bytes, 0), magic));
  }
  const uint64_t present = bytes.size() - header;
  uint64_t body = 1;
  bool too_large = false;
  for (size_t d = 0; d < dims; ++d) {
    counts[d] = big_endian(bytes, 4 + 4 * d);
    too_large |= counts[d] != 0 && body > UINT64_MAX / counts[d];
    body *= counts[d];
  }
  if (too_large) {
    throw UserError(fmt::format(
        "{}: truncated: the header's dimensions promise more than 2^64 bytes of data, {} present",
        path.string(), present));
  }
  if (present < body) {
    throw UserError(fmt::format("{}: truncated: the header promises {} bytes of data, {} present",
                                path.string(), body, present));
  }
  if (present > body) {
    throw UserError(
        fmt::format("{}: {} bytes of data, but the header promises {} (expected exactly that many)",
                    path.string(), present, body));
  }
  return header;
}

// `base` or `base`.gz in dir, preferring the plain file.
std::filesystem::path find(const std::filesystem::path& dir, const std::string& base) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir / base, ec)) return dir / base;
  if (std::filesystem::is_regular_file(dir / (base + ".gz"), ec)) return dir / (base + ".gz");
  throw UserError(
      fmt::format("{}: no {} (or {}.gz) in this folder (expected MNIST-format files: "
                  "train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                  "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte)",
                  dir.string(), base, base));
}

}  // namespace

Dataset load_idx_pair(const std::filesystem::path& images, const std::filesystem::path& labels,
                      const std::string& description) {
  const std::string img = read_maybe_gzip(images);
  const std::string lab = read_maybe_gzip(labels);
  uint64_t img_dims[3], lab_dims[1];
  const size_t img_at = check_header(img, images, kImageMagic, 3, img_dims);
  const size_t lab_at = check_header(lab, labels, kLabelMagic, 1, lab_dims);
  if (img_dims[0] == 0) throw UserError(fmt::format("{}: holds no images", images.string()));
  if (img_dims[1] == 0 || img_dims[2] == 0) {
    throw UserError(fmt::format("{}: images of {}x{} pixels (expected at least 1x1)",
                                images.string(), img_dims[1], img_dims[2]));
  }
  if (img_dims[0] != lab_dims[0]) {
    throw UserError(
        fmt::format("{} holds {} images but {} holds {} labels (expected one label "
                    "per image)",
                    images.string(), img_dims[0], labels.string(), lab_dims[0]));
  }
  Dataset d;
  d.samples = static_cast<int64_t>(img_dims[0]);
  d.features = static_cast<int64_t>(img_dims[1] * img_dims[2]);
  d.classes = kClasses;
  d.description = description;
  d.y.resize(d.samples);
  for (int64_t i = 0; i < d.samples; ++i) {
    const int label = static_cast<unsigned char>(lab[lab_at + i]);
    if (label >= kClasses) {
      throw UserError(fmt::format("{}: label {} of sample {} is out of range (expected 0 to {})",
                                  labels.string(), label, i, kClasses - 1));
    }
    d.y[i] = label;
  }
  d.x.resize(d.samples * d.features);
  const auto* pixels = reinterpret_cast<const unsigned char*>(img.data() + img_at);
  for (size_t i = 0; i < d.x.size(); ++i) d.x[i] = static_cast<float>(pixels[i]) / 255.0f;
  return d;
}

DataSplit load_idx_folder(const std::filesystem::path& dir, const std::string& name) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw UserError(fmt::format("{}: not a folder (expected a folder of MNIST-format IDX files)",
                                dir.string()));
  }
  // Every file is looked for before any is read, in this order, so the first missing one is named.
  const auto train_images = find(dir, "train-images-idx3-ubyte");
  const auto train_labels = find(dir, "train-labels-idx1-ubyte");
  const auto test_images = find(dir, "t10k-images-idx3-ubyte");
  const auto test_labels = find(dir, "t10k-labels-idx1-ubyte");
  DataSplit split;
  split.train = load_idx_pair(train_images, train_labels, "");
  split.test = load_idx_pair(test_images, test_labels, "");
  const std::string summary = fmt::format("{}: {} train / {} test images ({})", name,
                                          split.train.samples, split.test.samples, dir.string());
  split.train.description = summary + ", train split";
  split.test.description = summary + ", test split";
  return split;
}

DataSplit load_fashion_mnist() {
  const char* env = std::getenv("CROSSOVER_FASHION_MNIST_DIR");
  const std::filesystem::path dir = env && *env ? env : kFashionMnistDir;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw UserError(fmt::format(
        "{}: Fashion-MNIST is not installed (install the Debian package dataset-fashion-mnist, "
        "as scripts/setup does, or use data.source = \"idx:DIR\" with MNIST-format files)",
        dir.string()));
  }
  return load_idx_folder(dir, "fashion-mnist");
}

}  // namespace xo
