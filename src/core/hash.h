// A 64-bit content hash for fingerprints (a checkpoint's spec, data and settings; a run's final
// parameters in results.json): 8-byte words xored in, rotated and multiplied (FNV-1a's shape, with
// a rotation so high bits reach low ones), then a final avalanche. Not
// cryptographic; it tells "the same bytes" from "different bytes" with a 2^-64 chance of a miss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace xo {

class Hasher {
 public:
  Hasher& bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    // Whole words first: eight times fewer multiplies than byte-wise FNV, so a 50 MB data set
    // hashes in tens of milliseconds.
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      mix(word);
    }
    uint64_t tail = 0;
    if (n > i) std::memcpy(&tail, p + i, n - i);  // never memcpy from null (an empty vector's data)
    mix(tail ^ (static_cast<uint64_t>(n - i) << 56));
    length_ += n;
    return *this;
  }
  Hasher& text(std::string_view s) { return bytes(s.data(), s.size()); }
  template <typename T>
  Hasher& value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return bytes(&v, sizeof(T));
  }
  template <typename T>
  Hasher& values(std::span<const T> v) {
    value(v.size());
    return bytes(v.data(), v.size() * sizeof(T));
  }
  template <typename T>
  Hasher& values(const std::vector<T>& v) {
    return values(std::span<const T>(v));
  }

  uint64_t digest() const {
    // A final avalanche (splitmix64's) so that nearby inputs give unrelated digests.
    uint64_t z = state_ ^ length_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // 16 lowercase hex digits, as results.json and checkpoints write it.
  std::string hex() const {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s(16, '0');
    uint64_t d = digest();
    for (int i = 15; i >= 0; --i, d >>= 4) s[static_cast<size_t>(i)] = kDigits[d & 15];
    return s;
  }

 private:
  void mix(uint64_t word) {
    state_ ^= word;
    state_ = ((state_ << 29) | (state_ >> 35)) * 0x100000001b3ULL;  // the FNV prime
  }
  uint64_t state_ = 0xcbf29ce484222325ULL;  // the FNV offset basis
  uint64_t length_ = 0;
};

}  // namespace xo
