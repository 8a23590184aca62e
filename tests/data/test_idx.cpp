// The IDX loader: values and shapes from tiny files the test writes (plain and gzip), every error
// case named by file, and the real Fashion-MNIST where Debian's package is installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "data/idx.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string images_file(uint32_t n, uint32_t rows, uint32_t cols, uint32_t magic = 0x803) {
  std::string s = be32(magic) + be32(n) + be32(rows) + be32(cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) s += static_cast<char>((i * 37) % 256);
  return s;
}

std::string labels_file(const std::vector<int>& labels, uint32_t magic = 0x801) {
  std::string s = be32(magic) + be32(static_cast<uint32_t>(labels.size()));
  for (int l : labels) s += static_cast<char>(l);
  return s;
}

std::string gzip(const std::string& data) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

class IdxTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  // A complete folder: 3 train and 2 test images of 2x3 pixels.
  void write_folder(bool gz) {
    auto maybe = [&](const std::string& s) { return gz ? gzip(s) : s; };
    const std::string suffix = gz ? ".gz" : "";
    write("train-images-idx3-ubyte" + suffix, maybe(images_file(3, 2, 3)));
    write("train-labels-idx1-ubyte" + suffix, maybe(labels_file({1, 9, 0})));
    write("t10k-images-idx3-ubyte" + suffix, maybe(images_file(2, 2, 3)));
    write("t10k-labels-idx1-ubyte" + suffix, maybe(labels_file({4, 2})));
  }
  const testing::TempDir temp_{"xo_idx"};
  const fs::path dir_ = temp_.path();
};

TEST_F(IdxTest, ReadsPlainAndGzipFilesAndScalesPixels) {
  for (bool gz : {false, true}) {
    SCOPED_TRACE(gz ? "gzip" : "plain");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_folder(gz);
    const DataSplit d = load_idx_folder(dir_, "tiny");
    EXPECT_EQ(d.train.samples, 3);
    EXPECT_EQ(d.train.features, 6);
    EXPECT_EQ(d.train.classes, 10);
    EXPECT_EQ(d.train.y, (std::vector<int32_t>{1, 9, 0}));
    EXPECT_EQ(d.test.samples, 2);
    EXPECT_EQ(d.test.y, (std::vector<int32_t>{4, 2}));
    ASSERT_EQ(d.train.x.size(), 18u);
    for (size_t i = 0; i < d.train.x.size(); ++i) {
      EXPECT_FLOAT_EQ(d.train.x[i], static_cast<float>((i * 37) % 256) / 255.0f) << i;
    }
    EXPECT_NE(d.train.description.find("tiny: 3 train / 2 test images"), std::string::npos);
  }
}

TEST_F(IdxTest, ConcatenatedGzipMembersAreJoined) {
  const std::string bytes = images_file(3, 2, 2);
  const fs::path images = write("images", gzip(bytes.substr(0, 9)) + gzip(bytes.substr(9)));
  const fs::path labels = write("labels", labels_file({0, 1, 2}));
  const Dataset d = load_idx_pair(images, labels, "t");
  ASSERT_EQ(d.x.size(), 12u);
  EXPECT_FLOAT_EQ(d.x[11], static_cast<float>((11 * 37) % 256) / 255.0f);
}

TEST_F(IdxTest, PlainFileWinsOverGzip) {
  write_folder(true);
  write("train-labels-idx1-ubyte", labels_file({7, 7, 7}));
  EXPECT_EQ(load_idx_folder(dir_, "tiny").train.y, (std::vector<int32_t>{7, 7, 7}));
}

struct IdxErrorCase {
  std::string name;
  std::string images, labels;  // file contents
  std::vector<std::string> expected;
};

class IdxErrorTest : public IdxTest, public ::testing::WithParamInterface<IdxErrorCase> {};

TEST_P(IdxErrorTest, NamesTheFileAndTheProblem) {
  const IdxErrorCase& c = GetParam();
  const fs::path images = write("images", c.images);
  const fs::path labels = write("labels", c.labels);
  std::vector<std::string> expected = c.expected;
  testing::expect_user_error([&] { load_idx_pair(images, labels, "t"); }, expected);
}

std::string truncated(std::string s, size_t drop) { return s.substr(0, s.size() - drop); }

// Flips the bytes of the stored CRC: the stream inflates, then fails its check.
std::string corrupted(std::string gz) {
  for (size_t i = gz.size() - 8; i < gz.size() - 4; ++i) gz[i] = static_cast<char>(~gz[i]);
  return gz;
}

void PrintTo(const IdxErrorCase& c, std::ostream* os) { *os << c.name; }

INSTANTIATE_TEST_SUITE_P(
    Errors, IdxErrorTest,
    ::testing::Values(
        IdxErrorCase{"image_magic",
                     images_file(2, 2, 2, 0x801),
                     labels_file({1, 2}),
                     {"images: not an IDX image file", "0x00000801", "expected 0x00000803"}},
        IdxErrorCase{"label_magic",
                     images_file(2, 2, 2),
                     labels_file({1, 2}, 0x803),
                     {"labels: not an IDX label file", "expected 0x00000801"}},
        IdxErrorCase{"short_header",
                     std::string("\x00\x00\x08", 3),
                     labels_file({1}),
                     {"images: truncated: 3 bytes, shorter than the 16-byte IDX header"}},
        IdxErrorCase{"truncated_images",
                     truncated(images_file(2, 2, 2), 3),
                     labels_file({1, 2}),
                     {"images: truncated", "promises 8 bytes of data, 5 present"}},
        IdxErrorCase{"truncated_labels",
                     images_file(2, 2, 2),
                     truncated(labels_file({1, 2}), 1),
                     {"labels: truncated", "promises 2 bytes of data, 1 present"}},
        IdxErrorCase{"count_mismatch",
                     images_file(3, 2, 2),
                     labels_file({1, 2}),
                     {"holds 3 images but", "labels holds 2 labels"}},
        IdxErrorCase{"label_out_of_range",
                     images_file(2, 2, 2),
                     labels_file({3, 12}),
                     {"labels: label 12 of sample 1 is out of range (expected 0 to 9)"}},
        IdxErrorCase{
            "no_images", images_file(0, 2, 2), labels_file({}), {"images: holds no images"}},
        IdxErrorCase{"corrupt_gzip",
                     corrupted(gzip(images_file(4, 8, 8))),
                     labels_file({1, 2, 3, 4}),
                     {"images: corrupt gzip data"}},
        IdxErrorCase{"truncated_gzip",
                     truncated(gzip(images_file(4, 8, 8)), 12),
                     labels_file({1, 2, 3, 4}),
                     {"images: truncated gzip stream"}},
        IdxErrorCase{"garbage_after_gzip",
                     gzip(images_file(2, 2, 2)) + "junk",
                     labels_file({1, 2}),
                     {"images: corrupt gzip data (4 unexpected bytes after"}},
        IdxErrorCase{"longer_than_header",
                     images_file(2, 2, 2) + "xy",
                     labels_file({1, 2}),
                     {"images: 10 bytes of data, but the header promises 8"}},
        // 2^22 * 2^21 * 2^21 wraps to 0 in 64 bits.
        IdxErrorCase{"dimensions_overflow",
                     be32(0x803) + be32(1u << 22) + be32(1u << 21) + be32(1u << 21),
                     labels_file({1}),
                     {"images: the header's dimensions declare more than 2^64 bytes of data",
                      "expected at most 1073741824"}},
        // 2^12 * 2^10 * 2^9: 2 GiB, past the 1 GiB one IDX file may hold, refused from the header
        // alone.
        IdxErrorCase{"dimensions_past_limit",
                     be32(0x803) + be32(1u << 12) + be32(1u << 10) + be32(1u << 9),
                     labels_file({1}),
                     {"images: the header's dimensions declare 2147483648 bytes of data"}},
        IdxErrorCase{"gzip_wrong_magic",
                     gzip(images_file(2, 2, 2, 0x801)),
                     labels_file({1, 2}),
                     {"images: not an IDX image file", "expected 0x00000803"}},
        IdxErrorCase{"empty_images",
                     images_file(2, 0, 3),
                     labels_file({1, 2}),
                     {"images: images of 0x3 pixels (expected at least 1x1)"}}),
    [](const auto& param) { return param.param.name; });

// Cases whose files take a compression of megabytes to make: made when they run, not when the
// table above is registered (which every test process of the suite does at its start).
TEST_F(IdxTest, AGzipStreamPastItsHeaderIsRefusedBeforeItInflates) {
  // A small gzip stream that inflates far past what its header declares is refused after the
  // declared size, before it takes the memory it would inflate to.
  const fs::path labels = write("labels", labels_file({1}));
  const fs::path past_header =
      write("images", gzip(images_file(1, 1, 1) + std::string(16u << 20, '\0')));
  testing::expect_user_error(
      [&] { load_idx_pair(past_header, labels, "t"); },
      {"images: inflates to more than the 17 bytes its IDX header declares"});
  const fs::path past_limit = write("images", gzip(be32(0x803) + be32(1u << 12) + be32(1u << 10) +
                                                   be32(1u << 9) + std::string(1u << 20, '\0')));
  testing::expect_user_error([&] { load_idx_pair(past_limit, labels, "t"); },
                             {"images: the header's dimensions declare 2147483648 bytes of data"});
}

TEST_F(IdxTest, MissingFilesAndFoldersAreNamed) {
  testing::expect_user_error([&] { load_idx_folder(dir_, "tiny"); },
                             {dir_.string(),
                              "no train-images-idx3-ubyte (or "
                              "train-images-idx3-ubyte.gz) in this folder"});
  write_folder(false);
  fs::remove(dir_ / "t10k-labels-idx1-ubyte");
  testing::expect_user_error([&] { load_idx_folder(dir_, "tiny"); }, {"no t10k-labels-idx1-ubyte"});
  testing::expect_user_error([&] { load_idx_folder(dir_ / "nope", "tiny"); },
                             {"nope: not a folder"});
  testing::expect_user_error([&] { load_idx_pair(dir_ / "a", dir_ / "b", "t"); },
                             {(dir_ / "a").string(), "cannot open"});
}

// Points CROSSOVER_FASHION_MNIST_DIR somewhere for one scope, then restores it.
class ScopedFashionMnistDir {
 public:
  explicit ScopedFashionMnistDir(const fs::path& dir) {
    if (const char* old = std::getenv(kVar)) old_ = old;
    ::setenv(kVar, dir.c_str(), 1);
  }
  ~ScopedFashionMnistDir() {
    if (old_) {
      ::setenv(kVar, old_->c_str(), 1);
    } else {
      ::unsetenv(kVar);
    }
  }

 private:
  static constexpr const char* kVar = "CROSSOVER_FASHION_MNIST_DIR";
  std::optional<std::string> old_;
};

TEST_F(IdxTest, FashionMnistSaysHowToInstallIt) {
  ScopedFashionMnistDir env(dir_ / "absent");
  testing::expect_user_error([] { load_fashion_mnist(); },
                             {"absent: Fashion-MNIST is not installed",
                              "install the Debian package dataset-fashion-mnist", "idx:DIR"});
}

TEST_F(IdxTest, FashionMnistFolderComesFromTheEnvironment) {
  write_folder(true);
  ScopedFashionMnistDir env(dir_);
  const DataSplit d = load_fashion_mnist();
  EXPECT_EQ(d.train.y, (std::vector<int32_t>{1, 9, 0}));
  const std::string summary = "fashion-mnist: 3 train / 2 test images (" + dir_.string() + ")";
  EXPECT_EQ(d.train.description, summary + ", train split");
  EXPECT_EQ(d.test.description, summary + ", test split");
}

TEST(IdxFashionMnist, TheDebianPackageHasSixtyThousandBalancedImages) {
  if (!fs::is_directory("/usr/share/datasets/fashion-mnist")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/setup installs it)";
  }
  const DataSplit d = load_fashion_mnist();
  EXPECT_EQ(d.train.samples, 60000);
  EXPECT_EQ(d.test.samples, 10000);
  EXPECT_EQ(d.train.features, 784);
  std::vector<int> counts(10, 0);
  for (int32_t y : d.train.y) ++counts.at(y);
  for (int c : counts) EXPECT_EQ(c, 6000);
  float max = 0;
  for (float v : d.train.x) max = std::max(max, v);
  EXPECT_FLOAT_EQ(max, 1.0f);
}

}  // namespace
}  // namespace xo
