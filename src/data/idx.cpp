#include "data/idx.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/file.h"
#include "core/interrupt.h"

namespace xo {
namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;
constexpr int kClasses = 10;
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};
// Deflate never compresses better than about 1032:1, so a larger size in a gzip trailer is a lie.
constexpr uint64_t kMaxDeflateRatio = 1032;
// Output one inflate call may write: 64 MiB, a tenth of a second or so.
constexpr size_t kInflateChunk = size_t{64} << 20;
// The most data one IDX file may hold: 1 GiB, twice EMNIST's largest image file (697,932 images of
// 28 x 28, 547 MB), and 4 GiB once stored as float features.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 30;

bool starts_with_gzip_magic(const std::string& bytes, size_t at) {
  return bytes.size() >= at + 2 && static_cast<unsigned char>(bytes[at]) == kGzipMagic[0] &&
         static_cast<unsigned char>(bytes[at + 1]) == kGzipMagic[1];
}

uint32_t big_endian(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// Checks the magic and the dimensions of the header at the start of `bytes`; returns the header's
// size and the data's, in bytes. Three 32-bit dimensions can multiply past 64 bits, so the
// product is checked as it grows.
struct IdxSize {
  size_t header = 0;
  uint64_t body = 0;
};
IdxSize read_idx_size(const std::string& bytes, const std::string& name, uint32_t magic,
                      size_t dims, uint64_t* counts) {
  IdxSize size;
  size.header = 4 + 4 * dims;
  if (bytes.size() < size.header) {
    throw UserError(fmt::format("{}: truncated: {} bytes, shorter than the {}-byte IDX header",
                                name, bytes.size(), size.header));
  }
  if (big_endian(bytes, 0) != magic) {
    throw UserError(fmt::format("{}: not an IDX {} file: magic number 0x{:08x}, expected 0x{:08x}",
                                name, magic == kImageMagic ? "image" : "label",
                                big_endian(bytes, 0), magic));
  }
  size.body = 1;
  bool too_large = false;
  for (size_t d = 0; d < dims; ++d) {
    counts[d] = big_endian(bytes, 4 + 4 * d);
    too_large |= counts[d] != 0 && size.body > UINT64_MAX / counts[d];
    size.body *= counts[d];
  }
  if (too_large || size.body > kMaxIdxBytes) {
    throw UserError(fmt::format(
        "{}: the header's dimensions declare {} bytes of data (expected at most {}, the most "
        "crossover reads from one IDX file)",
        name, too_large ? std::string("more than 2^64") : std::to_string(size.body), kMaxIdxBytes));
  }
  return size;
}

// A gzip trailer's last 4 bytes hold the inflated size (mod 2^32): one allocation for real files.
uint64_t gzip_size_hint(const std::string& raw) {
  uint64_t size = 0;
  for (size_t i = 0; i < 4 && raw.size() >= 4; ++i) {
    size = (size << 8) | static_cast<unsigned char>(raw[raw.size() - 1 - i]);
  }
  return size;
}

// The file's bytes, inflated when they start with the gzip magic. Concatenated gzip members are
// joined, as gunzip does. A stream inflates to the size its IDX header declares (magic `magic`,
// `dims` dimensions) and no further: the output never grows past that, so a small file that
// inflates to gigabytes is refused after its declared size, not when memory runs out.
std::string maybe_inflate(std::string raw, const std::string& name, uint32_t magic, size_t dims) {
  if (!starts_with_gzip_magic(raw, 0)) return raw;
  z_stream z{};
  // 16 + MAX_WBITS: expect a gzip header.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    throw UserError(fmt::format("{}: cannot start gzip decompression", name));
  }
  const uint64_t size_hint = gzip_size_hint(raw);
  uint64_t counts[3];
  std::optional<uint64_t> declared;     // header and data, once the header is inflated
  std::string out(4 + 4 * dims, '\0');  // first the header only
  z.next_in = reinterpret_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(std::min<size_t>(raw.size(), UINT32_MAX));
  auto fail = [&](const std::string& why) {
    inflateEnd(&z);
    throw UserError(fmt::format("{}: {}", name, why));
  };
  size_t done = 0;  // not z.total_out: inflateReset clears it
  for (;;) {
    if (done == out.size()) {
      if (!declared) {
        try {
          const IdxSize size = read_idx_size(out, name, magic, dims, counts);
          declared = size.header + size.body;
        } catch (const UserError&) {
          inflateEnd(&z);
          throw;
        }
      }
      if (done > *declared) {
        fail(fmt::format("inflates to more than the {} bytes its IDX header declares", *declared));
      }
      // One byte past the declared size, to see a stream that goes on.
      const uint64_t first = std::min<uint64_t>(size_hint, raw.size() * kMaxDeflateRatio) + 1;
      out.resize(std::min<uint64_t>(*declared + 1, std::max<uint64_t>(2 * out.size(), first)));
    }
    // At most kInflateChunk a call (a fraction of a second), so that a stop request is seen.
    if (stop_requested()) {
      inflateEnd(&z);
      throw Interrupted("decompressing " + name);
    }
    const auto room = static_cast<uInt>(std::min<size_t>(out.size() - done, kInflateChunk));
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

// Checks that the body holds exactly what the header says; returns the body's offset.
size_t check_header(const std::string& bytes, const std::string& name, uint32_t magic, size_t dims,
                    uint64_t* counts) {
  const IdxSize size = read_idx_size(bytes, name, magic, dims, counts);
  const uint64_t present = bytes.size() - size.header;
  if (present < size.body) {
    throw UserError(fmt::format("{}: truncated: the header promises {} bytes of data, {} present",
                                name, size.body, present));
  }
  if (present > size.body) {
    throw UserError(
        fmt::format("{}: {} bytes of data, but the header promises {} (expected exactly that many)",
                    name, present, size.body));
  }
  return size.header;
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
  // Images first, so that a missing image file is the one named when both are.
  std::string image_bytes = read_file(images);
  return parse_idx_pair(std::move(image_bytes), images.string(), read_file(labels), labels.string(),
                        description);
}

Dataset parse_idx_pair(std::string images_bytes, const std::string& images,
                       std::string labels_bytes, const std::string& labels,
                       const std::string& description) {
  const std::string img = maybe_inflate(std::move(images_bytes), images, kImageMagic, 3);
  const std::string lab = maybe_inflate(std::move(labels_bytes), labels, kLabelMagic, 1);
  uint64_t img_dims[3], lab_dims[1];
  const size_t img_at = check_header(img, images, kImageMagic, 3, img_dims);
  const size_t lab_at = check_header(lab, labels, kLabelMagic, 1, lab_dims);
  if (img_dims[0] == 0) throw UserError(fmt::format("{}: holds no images", images));
  if (img_dims[1] == 0 || img_dims[2] == 0) {
    throw UserError(fmt::format("{}: images of {}x{} pixels (expected at least 1x1)", images,
                                img_dims[1], img_dims[2]));
  }
  if (img_dims[0] != lab_dims[0]) {
    throw UserError(
        fmt::format("{} holds {} images but {} holds {} labels (expected one label "
                    "per image)",
                    images, img_dims[0], labels, lab_dims[0]));
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
                                  labels, label, i, kClasses - 1));
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
