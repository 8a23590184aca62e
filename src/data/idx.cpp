#include "data/idx.h"

#include <fmt/format.h>
#include <zlib.h>

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

// The file's bytes, inflated when it starts with the gzip magic.
std::string read_maybe_gzip(const std::filesystem::path& path) {
  std::string raw = read_file(path);
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f ||
      static_cast<unsigned char>(raw[1]) != 0x8b) {
    return raw;
  }
  z_stream z{};
  // 16 + MAX_WBITS: expect a gzip header.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    throw UserError(fmt::format("{}: cannot start gzip decompression", path.string()));
  }
  std::string out;
  out.resize(raw.size() * 4 + 1024);
  z.next_in = reinterpret_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (z.total_out == out.size()) out.resize(out.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + z.total_out);
    z.avail_out = static_cast<uInt>(out.size() - z.total_out);
    status = inflate(&z, Z_NO_FLUSH);
    if (status == Z_STREAM_END) break;
    if (status != Z_OK && status != Z_BUF_ERROR) {
      const std::string why = z.msg ? z.msg : "invalid data";
      inflateEnd(&z);
      throw UserError(fmt::format("{}: corrupt gzip data ({})", path.string(), why));
    }
    if (status == Z_BUF_ERROR && z.avail_in == 0) {
      inflateEnd(&z);
      throw UserError(
          fmt::format("{}: truncated gzip stream (it ends before its end marker)", path.string()));
    }
  }
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

uint32_t big_endian(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// Checks the magic and that the body holds what the header says; returns the body's offset.
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
  uint64_t body = 1;
  for (size_t d = 0; d < dims; ++d) {
    counts[d] = big_endian(bytes, 4 + 4 * d);
    body *= counts[d];
  }
  if (bytes.size() - header < body) {
    throw UserError(fmt::format("{}: truncated: the header promises {} bytes of data, {} present",
                                path.string(), body, bytes.size() - header));
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
