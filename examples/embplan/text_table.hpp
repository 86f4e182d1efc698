#pragma once
// A tiny aligned text table for the CLI's reports.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

namespace embplan_cli {

class text_table {
 public:
  explicit text_table(std::vector<std::string> header) : header_(std::move(header)) {}

  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  // First column left-aligned, the others right-aligned (they hold numbers).
  void print(std::ostream& os) const {
    print_each(os, [&](const auto& each) {
      for (const auto& r : rows_)
        each(r);
    });
  }

  // print() of `count` rows made by row(i), with none kept: each row is made
  // twice, once to measure the columns and once to print it (a plan of a
  // million pieces prints without a million rows in memory).
  template <class Row>
  void print_rows(std::ostream& os, std::size_t count, Row&& row) const {
    print_each(os, [&](const auto& each) {
      for (std::size_t i = 0; i < count; ++i)
        each(row(i));
    });
  }

 private:
  // rows(each) calls each(row) for every row, in order; it is called twice.
  template <class Rows>
  void print_each(std::ostream& os, const Rows& rows) const {
    std::vector<std::size_t> width(header_.size(), 0);
    auto measure = [&](const std::vector<std::string>& r) {
      for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) {
        width[i] = std::max(width[i], r[i].size());
      }
    };
    measure(header_);
    rows(measure);
    auto line = [&](const std::vector<std::string>& r) {
      for (std::size_t i = 0; i < width.size(); ++i) {
        const std::string& cell = i < r.size() ? r[i] : std::string();
        const std::string pad(width[i] - cell.size(), ' ');
        if (i > 0) os << "  ";
        os << (i == 0 ? cell + pad : pad + cell);
      }
      os << '\n';
    };
    line(header_);
    std::size_t total = 0;
    for (auto w : width)
      total += w;
    os << std::string(total + 2 * (width.size() - 1), '-') << '\n';
    rows(line);
  }

  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

inline std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A size for a person: "1.50 GiB", "12.0 MiB", "3.0 KiB", "512 B".
inline std::string bytes_text(std::uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes >= (std::uint64_t{1} << 30)) return fixed(b / double(std::uint64_t{1} << 30)) + " GiB";
  if (bytes >= (std::uint64_t{1} << 20))
    return fixed(b / double(std::uint64_t{1} << 20), 1) + " MiB";
  if (bytes >= (std::uint64_t{1} << 10))
    return fixed(b / double(std::uint64_t{1} << 10), 1) + " KiB";
  return std::to_string(bytes) + " B";
}

// `text` as lines of at most `width` columns, broken at spaces (a word longer
// than a line stands alone).
inline void print_wrapped(std::ostream& os, const std::string& text, std::size_t width = 80) {
  std::size_t column = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t end = std::min(text.find(' ', i), text.size());
    const std::size_t word = end - i;
    if (column > 0 && column + 1 + word > width) {
      os << '\n';
      column = 0;
    } else if (column > 0) {
      os << ' ';
      ++column;
    }
    os << text.substr(i, word);
    column += word;
    i = end + 1;
  }
  os << '\n';
}

}  // namespace embplan_cli
