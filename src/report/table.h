// A plain terminal table: columns sized to their widest cell, numbers right-aligned, every cell
// terminal-safe (control characters shown as \xNN, see terminal_safe).
#pragma once

#include <string>
#include <vector>

namespace xo {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  void add_row(std::vector<std::string> cells);
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace xo
