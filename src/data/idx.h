// MNIST-format (IDX) data: an image file and a label file, plain or gzip-compressed, and the
// folders that hold a train and a test pair (real MNIST, or Debian's dataset-fashion-mnist).
#pragma once

#include <filesystem>
#include <string>

#include "data/dataset.h"

namespace xo {

// images: magic 0x00000803, big-endian counts n, rows, cols, then n*rows*cols bytes; labels: magic
// 0x00000801, n, then n bytes. Either may be gzip'd (recognised by its magic bytes, not its name).
// Pixels are scaled to [0, 1] (v / 255), features = rows * cols, classes = 10. Throws UserError
// naming the file for a missing or unreadable file, a wrong magic number, a file shorter or longer
// than its header says, a corrupt gzip stream, no images or empty images, image and label counts
// that differ, and a label out of range (>= 10).
Dataset load_idx_pair(const std::filesystem::path& images, const std::filesystem::path& labels,
                      const std::string& description);
// The same from the two files' bytes; `images` and `labels` name them in errors. A gzip stream is
// inflated no further than its IDX header declares, and a header may declare at most 1 GiB.
Dataset parse_idx_pair(std::string images_bytes, const std::string& images,
                       std::string labels_bytes, const std::string& labels,
                       const std::string& description);

// A folder with train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte, each possibly with a .gz suffix. `name` labels the data sets.
DataSplit load_idx_folder(const std::filesystem::path& dir, const std::string& name);

// Fashion-MNIST from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, or the
// folder in $CROSSOVER_FASHION_MNIST_DIR).
DataSplit load_fashion_mnist();

}  // namespace xo
