#pragma once
// safetensors read / write, so weights trained in PyTorch load under their
// state_dict names (docs/learned-models.md, "Weights"). The format: an 8-byte
// little-endian header length N, N bytes of JSON
//   {"t_hidden.0.weight": {"dtype": "F32", "shape": [128, 21],
//                          "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// then the data, offsets counted from its start. Every byte position is
// checked before it is read: a truncated, lying or inconsistent file is an
// embplan::error naming the file, the tensor and the field, never an
// out-of-bounds read. A tensor entry has exactly "dtype", "shape" and
// "data_offsets" (another key is an error naming it); "__metadata__" is
// free-form string -> string. Values are held as float32 whatever the stored dtype.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/atomic_file.hpp"
#include "embplan/io/detail/json_access.hpp"
#include "embplan/io/detail/safetensors_format.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

struct tensor {
  // As stored ("F32", "F16", "BF16", "F64", "I64", "I32") when read; the
  // dtype to store when written (empty means "F32").
  std::string dtype = "F32";
  std::vector<std::int64_t> shape{};  // [] is a scalar (one value)
  std::vector<float> values{};        // row-major, converted to float32
};

struct safetensors_file {
  std::map<std::string, tensor> tensors{};
  std::map<std::string, std::string> metadata{};  // "__metadata__": string -> string
  std::string source{};  // the file (or parse source) it came from; used in messages only
};

namespace detail {

inline nlohmann::json shape_json(std::span<const std::int64_t> shape) {
  return nlohmann::json(std::vector<std::int64_t>(shape.begin(), shape.end()));
}

inline std::string shape_text(std::span<const std::int64_t> shape) {
  return shape_json(shape).dump();
}

inline std::uint64_t element_count(std::span<const std::int64_t> shape, std::string_view field) {
  std::uint64_t n = 1;
  for (const auto d : shape) {
    if (d < 0) fail_value(field, shape_json(shape), "non-negative dimensions");
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) {
      fail_value(field, shape_json(shape), "a shape whose element count fits in 64 bits");
    }
  }
  return n;
}

struct st_entry {
  std::string name;
  const st_dtype_info* dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

// A tensor entry's keys; "__metadata__" is the one free-form object.
inline constexpr std::string_view st_entry_keys[] = {"dtype", "shape", "data_offsets"};

inline st_entry parse_st_entry(const nlohmann::json& j, const std::string& name,
                               std::uint64_t data_bytes, std::string_view source) {
  const std::string where = st_tensor_field(source, name);
  require_object(j, where);
  check_keys(j, st_entry_keys, where);
  st_entry e{.name = name, .dtype = nullptr, .shape = {}, .begin = 0, .end = 0};

  const auto dtype_field = st_tensor_field(source, name, "dtype");
  const auto& dtype = require(j, "dtype", where, st_dtype_expected);
  e.dtype = find_st_dtype(as_string(dtype, dtype_field));
  if (e.dtype == nullptr) fail_value(dtype_field, dtype, st_dtype_expected);

  const auto shape_field = st_tensor_field(source, name, "shape");
  const auto& shape = require(j, "shape", where, "an array of non-negative dimensions");
  require_array(shape, shape_field);
  for (std::size_t k = 0; k < shape.size(); ++k) {
    const std::int64_t d = as_int64(shape[k], embplan::detail::path(shape_field, k));
    if (d < 0) fail_value(shape_field, shape, "non-negative dimensions");
    e.shape.push_back(d);
  }
  const std::uint64_t count = element_count(e.shape, shape_field);
  std::uint64_t size_bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(e.dtype->size_bytes), &size_bytes)) {
    fail_value(shape_field, shape, "a shape whose byte size fits in 64 bits");
  }

  const auto offsets_field = st_tensor_field(source, name, "data_offsets");
  const auto& offsets = require(j, "data_offsets", where, "[begin, end] byte offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    fail_value(offsets_field, offsets, "[begin, end] byte offsets");
  }
  e.begin = as_uint64(offsets[0], embplan::detail::path(offsets_field, std::size_t{0}));
  e.end = as_uint64(offsets[1], embplan::detail::path(offsets_field, std::size_t{1}));
  if (e.begin > e.end) fail_value(offsets_field, offsets, "begin <= end");
  if (e.end > data_bytes) {
    fail_value(offsets_field, offsets,
               "offsets within the data buffer of " + std::to_string(data_bytes) +
                   " bytes (truncated file?)");
  }
  if (e.end - e.begin != size_bytes) {
    fail_value(offsets_field, offsets,
               std::to_string(size_bytes) + " bytes, the size of " + std::string(e.dtype->name) +
                   " x shape " + shape.dump());
  }
  return e;
}

// The reference implementation's rule: tensors tile the data buffer exactly,
// no gap, no overlap, no trailing bytes.
inline void check_st_layout(std::vector<st_entry>& entries, std::uint64_t data_bytes,
                            std::string_view source) {
  std::vector<const st_entry*> order;
  order.reserve(entries.size());
  for (const auto& e : entries)
    order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const st_entry* a, const st_entry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  std::uint64_t expected = 0;
  const st_entry* previous = nullptr;
  for (const auto* e : order) {
    if (e->begin != expected) {
      std::string what = "to begin at byte " + std::to_string(expected);
      what += previous == nullptr ? ", the start of the data buffer"
                                  : ", where tensor \"" + previous->name + "\" ends";
      what += " (tensors must not overlap or leave gaps)";
      fail_value(st_tensor_field(source, e->name, "data_offsets"),
                 nlohmann::json::array({e->begin, e->end}), what);
    }
    expected = e->end;
    previous = e;
  }
  if (expected != data_bytes) {
    embplan::detail::fail(
        st_field(source, "data_size_bytes"), data_bytes,
        std::to_string(expected) + " bytes, the end of the last tensor (trailing bytes)");
  }
}

inline std::vector<std::byte> serialize_st(const safetensors_file& file,
                                           std::string_view dtype_override,
                                           std::string_view destination) {
  struct planned {
    const std::string* name;
    const tensor* t;
    const st_dtype_info* dtype;
    std::uint64_t size_bytes;
  };
  std::vector<planned> items;
  items.reserve(file.tensors.size());
  for (const auto& [name, t] : file.tensors) {
    if (name == "__metadata__") {
      embplan::detail::fail(st_field(destination, "tensors"), name,
                            "a tensor name other than \"__metadata__\" (reserved)");
    }
    std::string_view dtype_name =
        dtype_override.empty() ? std::string_view(t.dtype) : dtype_override;
    if (dtype_name.empty()) dtype_name = "F32";
    const auto* dtype = find_st_dtype(dtype_name);
    if (dtype == nullptr) {
      embplan::detail::fail(st_tensor_field(destination, name, "dtype"), dtype_name,
                            st_dtype_expected);
    }
    const auto shape_field = st_tensor_field(destination, name, "shape");
    const std::uint64_t count = element_count(t.shape, shape_field);
    if (count != t.values.size()) {
      embplan::detail::fail(
          st_tensor_field(destination, name, "values.size"), t.values.size(),
          std::to_string(count) + " values, the product of shape " + shape_text(t.shape));
    }
    items.push_back({.name = &name,
                     .t = &t,
                     .dtype = dtype,
                     .size_bytes = count * static_cast<std::uint64_t>(dtype->size_bytes)});
  }
  std::stable_sort(items.begin(), items.end(), [](const planned& a, const planned& b) {
    return st_dtype_rank(*a.dtype) < st_dtype_rank(*b.dtype);  // names already sorted
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) {
    auto& meta = header["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : file.metadata)
      meta[key] = value;
  }
  std::uint64_t offset = 0;
  for (const auto& item : items) {
    header[*item.name] = {{"dtype", item.dtype->name},
                          {"shape", item.t->shape},
                          {"data_offsets", {offset, offset + item.size_bytes}}};
    offset += item.size_bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw error(st_field(destination, "header") +
                ": a tensor name or metadata string is not valid UTF-8: " + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the reference pads to 8 bytes

  std::vector<std::byte> out(8 + text.size() + offset);
  store_le(out.data(), text.size(), 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::byte* data = out.data() + 8 + text.size();
  for (const auto& item : items) {
    encode_elements(*item.dtype, item.t->values, data, st_tensor_field(destination, *item.name));
    data += item.size_bytes;
  }
  return out;
}

}  // namespace detail

// Parses a whole safetensors file held in memory. `source` names it in messages.
inline safetensors_file parse_safetensors(std::span<const std::byte> bytes,
                                          std::string_view source = "<input>") {
  using namespace detail;
  safetensors_file out;
  out.source = std::string(source);
  if (bytes.size() < 8) {
    embplan::detail::fail(st_field(source, "size_bytes"), bytes.size(),
                          "at least 8 bytes (the header length); not a safetensors file");
  }
  const std::uint64_t header_bytes = load_le(bytes.data(), 8);
  const std::uint64_t rest = bytes.size() - 8;
  if (header_bytes > rest || header_bytes > safetensors_max_header_bytes) {
    refuse_text_file(bytes, source);
  }
  if (header_bytes > rest) {
    embplan::detail::fail(st_field(source, "header_length"), header_bytes,
                          "at most " + std::to_string(rest) +
                              " bytes, what follows it in the file (truncated file?)");
  }
  if (header_bytes > safetensors_max_header_bytes) {
    embplan::detail::fail(st_field(source, "header_length"), header_bytes,
                          "at most 100000000 bytes (the reference implementation's limit)");
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  const nlohmann::json header =
      parse_st_header(std::string_view(header_begin, header_bytes), source);
  if (!header.is_object()) fail_value(st_field(source, "header"), header, "a JSON object");

  const std::byte* data = bytes.data() + 8 + header_bytes;
  const std::uint64_t data_bytes = rest - header_bytes;
  std::vector<st_entry> entries;
  entries.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      const auto field = st_field(source, "__metadata__");
      require_object(it.value(), field);
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        out.metadata[m.key()] = as_string(m.value(), field + "[\"" + m.key() + "\"]");
      }
      continue;
    }
    entries.push_back(parse_st_entry(it.value(), it.key(), data_bytes, source));
  }
  check_st_layout(entries, data_bytes, source);

  for (const auto& e : entries) {
    tensor t;
    t.dtype = std::string(e.dtype->name);
    t.shape = e.shape;
    t.values.resize(static_cast<std::size_t>((e.end - e.begin) / e.dtype->size_bytes));
    decode_elements(*e.dtype, data + e.begin, t.values, st_tensor_field(source, e.name));
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

// Reads a regular file of at most detail::safetensors_max_file_bytes: a
// directory, a device such as /dev/zero or a FIFO is refused, naming the path.
inline safetensors_file read_safetensors(const std::filesystem::path& file) {
  const std::string bytes =
      detail::read_regular_file(file, "safetensors file", detail::safetensors_max_file_bytes);
  return parse_safetensors(std::as_bytes(std::span(bytes.data(), bytes.size())), file.string());
}

// The bytes of `file` in the safetensors format. Each tensor is stored in its
// own `dtype`, or in `dtype` when one is given ("F32", "F16", ...). The output
// is deterministic: "__metadata__" first, then tensors by element size (widest
// first, so each starts aligned) and name; the header is padded with spaces to
// a multiple of 8 bytes, as the reference implementation writes it.
inline std::vector<std::byte> serialize_safetensors(const safetensors_file& file,
                                                    std::string_view dtype = {}) {
  return detail::serialize_st(file, dtype, "<output>");
}

// Writes serialize_safetensors' bytes atomically: a write that fails part-way
// leaves the previous file as it was.
inline void write_safetensors(const std::filesystem::path& file, const safetensors_file& content,
                              std::string_view dtype = {}) {
  const auto bytes = detail::serialize_st(content, dtype, file.string());
  detail::write_file_atomically(
      file, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// The tensor `name`, which must have `expected_shape` (a -1 dimension matches
// any size). A missing tensor or another shape is an error naming the file,
// the tensor, and both shapes.
inline const tensor& require_tensor(const safetensors_file& file, std::string_view name,
                                    std::span<const std::int64_t> expected_shape) {
  const auto source = file.source.empty() ? std::string_view("<input>") : file.source;
  std::string expected = "a tensor of shape " + detail::shape_text(expected_shape);
  const auto it = file.tensors.find(std::string(name));
  if (it == file.tensors.end()) {
    embplan::detail::fail_missing(detail::st_tensor_field(source, name), expected);
  }
  const auto& shape = it->second.shape;
  bool ok = shape.size() == expected_shape.size();
  for (std::size_t k = 0; ok && k < shape.size(); ++k)
    ok = expected_shape[k] == -1 || expected_shape[k] == shape[k];
  if (!ok) {
    detail::fail_value(detail::st_tensor_field(source, name, "shape"), nlohmann::json(shape),
                       "shape " + detail::shape_text(expected_shape));
  }
  return it->second;
}

inline const tensor& require_tensor(const safetensors_file& file, std::string_view name,
                                    std::initializer_list<std::int64_t> expected_shape) {
  return require_tensor(file, name, std::span<const std::int64_t>(expected_shape));
}

// The file holds exactly the tensors `expected`: every missing and every
// unexpected name is listed in one message.
inline void check_names(const safetensors_file& file, std::span<const std::string> expected) {
  const std::set<std::string, std::less<>> wanted(expected.begin(), expected.end());
  std::vector<std::string> missing;
  std::vector<std::string> unexpected;
  for (const auto& name : wanted)
    if (!file.tensors.contains(name)) missing.push_back(name);
  for (const auto& [name, t] : file.tensors)
    if (!wanted.contains(name)) unexpected.push_back(name);
  if (missing.empty() && unexpected.empty()) return;
  const auto source = file.source.empty() ? std::string_view("<input>") : file.source;
  std::string msg = detail::st_field(source, "tensor names do not match the model:");
  if (!missing.empty()) msg += " missing " + nlohmann::json(missing).dump();
  if (!missing.empty() && !unexpected.empty()) msg += ';';
  if (!unexpected.empty()) msg += " unexpected " + nlohmann::json(unexpected).dump();
  msg += " (expected exactly " + std::to_string(wanted.size()) + " tensors)";
  throw error(msg);
}

inline void check_names(const safetensors_file& file,
                        std::initializer_list<std::string_view> expected) {
  std::vector<std::string> names(expected.begin(), expected.end());
  check_names(file, std::span<const std::string>(names));
}

// Refuses NaN / Inf values in tensor `name`, naming it and the first bad index.
inline void check_finite(const safetensors_file& file, std::string_view name) {
  const auto source = file.source.empty() ? std::string_view("<input>") : file.source;
  const auto it = file.tensors.find(std::string(name));
  if (it == file.tensors.end()) {
    embplan::detail::fail_missing(detail::st_tensor_field(source, name), "a tensor");
  }
  const auto& values = it->second.values;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      embplan::detail::fail(
          embplan::detail::path(detail::st_tensor_field(source, name, "values"), i), values[i],
          "a finite number (NaN / Inf weights are refused)");
    }
  }
}

// check_finite for every tensor of the file, in name order.
inline void check_finite(const safetensors_file& file) {
  for (const auto& [name, t] : file.tensors)
    check_finite(file, name);
}

}  // namespace embplan::inline EMBPLAN_ABI::io
