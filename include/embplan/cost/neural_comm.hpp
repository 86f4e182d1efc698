#pragma once
// neural_comm: learned all-to-all costs, NeuroShard's two communication cost
// models (MLSys'23 §3.2 "Communication cost model", Fig. 5 right, App. C):
//   forward   [dim_sum_0 .. dim_sum_{D-1}, skew_0 .. skew_{D-1}] -> per-device ms
//   backward  [dim_sum_0 .. dim_sum_{D-1}]                        -> per-device ms
// each an MLP 128-64-32-16 with one output per device (nn::comm_cost_net,
// PyTorch names `hidden.{k}`, features normalised with stored statistics),
// evaluated through an inference snapshot of each (nn::packed_comm_cost_net).
// skew_d = start_d - min(start), as NeuroShard's simulator's "sleep times".
// A model knows one device count; a task on another count is refused. A task
// at another batch size is priced as the dim sums that move the same bytes
// at the measured batch. A prediction below zero is clamped to 0, unless a
// caller of the one-network methods asks for the raw output (clamp = false;
// NeuroShard's simulator uses the raw predictions).
// Invariant: backward_communication() and forward_communication() (the
// split_communication refinement, concepts/cost_model.hpp) each give, bit for
// bit, their half of communication()'s figures; the normalisation is not
// folded into the first layer's weights, since that would round differently
// and plans must not change.
// Files: one safetensors holding both networks under "forward." and
// "backward." and string metadata (embplan.kind = "comm_cost_net", devices,
// meter, batch size, the MLP sizes; other keys kept verbatim).
// Design notes: docs/design/learned-cost-models.md.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/detail/metadata.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/comm_cost_net.hpp"
#include "embplan/nn/packed_comm_cost_net.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct neural_comm_metadata {
  std::size_t devices = 0;        // the device count the models were trained for
  std::string meter = "unknown";  // what measured the training data ("mpi-alltoallv", ...)
  std::int64_t batch_size = 0;    // global batch of the measured all-to-alls
  std::string trained_on;
  std::map<std::string, std::string> extra;  // metrics and anything else, kept verbatim
};

namespace cost::detail {

// The forward model's input row: dim sums scaled by `scale`, then start skews.
inline void comm_forward_features(std::span<const std::int64_t> dim_sum,
                                  std::span<const double> start_ms, double scale,
                                  Eigen::Ref<nn::matrix> row) {
  const auto n = dim_sum.size();
  const double first = start_ms.empty() ? 0.0 : *std::min_element(start_ms.begin(), start_ms.end());
  for (std::size_t d = 0; d < n; ++d) {
    row(0, static_cast<Eigen::Index>(d)) =
        static_cast<float>(static_cast<double>(dim_sum[d]) * scale);
    row(0, static_cast<Eigen::Index>(n + d)) = static_cast<float>(start_ms[d] - first);
  }
}

// The backward model's input row: dim sums scaled by `scale`.
inline void comm_backward_features(std::span<const std::int64_t> dim_sum, double scale,
                                   Eigen::Ref<nn::matrix> row) {
  for (std::size_t d = 0; d < dim_sum.size(); ++d)
    row(0, static_cast<Eigen::Index>(d)) =
        static_cast<float>(static_cast<double>(dim_sum[d]) * scale);
}

}  // namespace cost::detail

class neural_comm {
 public:
  neural_comm() = default;
  neural_comm(const nn::comm_cost_net& forward, const nn::comm_cost_net& backward,
              neural_comm_metadata meta) {
    const auto& m = meta;
    if (m.devices < 1) embplan::detail::fail("neural_comm.devices", m.devices, "at least 1 device");
    const auto n = static_cast<Eigen::Index>(m.devices);
    check_net(forward, "neural_comm.forward", 2 * n, n, "2 x devices inputs (dim sums, skews)");
    check_net(backward, "neural_comm.backward", n, n, "devices inputs (dim sums)");
    if (m.batch_size < 1) {
      embplan::detail::fail("neural_comm.batch_size", m.batch_size, "a positive batch size");
    }
    state_ = std::make_shared<const state>(forward, backward, std::move(meta));
  }

  // This model on another kernel of the packed networks (nn::simd_kernel;
  // automatic, the default: the widest this CPU runs). Every kernel gives the
  // same figures, bit for bit (nn/packed_comm_cost_net.hpp), so this changes
  // speed only. A kernel this CPU cannot run throws, naming it.
  neural_comm with_kernel(nn::simd_kernel kernel) const {
    const state& s = require();
    neural_comm out = *this;
    out.state_ = std::make_shared<const state>(s.forward, s.backward, s.meta, kernel);
    return out;
  }

  // The packed networks' kernel (never automatic).
  nn::simd_kernel kernel() const { return require().packed_forward.kernel(); }

  std::string_view name() const noexcept { return "neural_comm"; }
  const neural_comm_metadata& metadata() const { return require().meta; }
  std::size_t devices() const { return require().meta.devices; }
  const nn::comm_cost_net& forward_network() const { return require().forward; }
  const nn::comm_cost_net& backward_network() const { return require().backward; }

  // Per-device forward / backward all-to-all ms (the CostModel contract's
  // communication, concepts/cost_model.hpp), both clamped at 0. A template so
  // that only a TU pricing with it instantiates the networks' Eigen code
  // (nn/tensor.hpp).
  template <class = void>
  void communication(const task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<comm_cost> out) const {
    const state& s = require();
    const double scale = validate(s, t, dim_sum, &start_ms, "out.size", out.size());
    run_forward(s, dim_sum, start_ms, scale, true,
                [&](std::size_t d, double ms) { out[d].fwd_ms = ms; });
    run_backward(s, dim_sum, scale, true, [&](std::size_t d, double ms) { out[d].bwd_ms = ms; });
  }

  // The backward network only: bwd_ms[d] is communication()'s out[d].bwd_ms
  // bit for bit (clamp = true), or the network's raw output, which may be
  // negative (clamp = false). The same checks and messages as communication().
  template <class = void>
  void backward_communication(const task& t, std::span<const std::int64_t> dim_sum,
                              std::span<double> bwd_ms, bool clamp = true) const {
    const state& s = require();
    const double scale = validate(s, t, dim_sum, nullptr, "bwd_ms.size", bwd_ms.size());
    run_backward(s, dim_sum, scale, clamp, [&](std::size_t d, double ms) { bwd_ms[d] = ms; });
  }

  // The forward network only: fwd_ms[d] is communication()'s out[d].fwd_ms
  // bit for bit (clamp = true), or the raw output (clamp = false).
  template <class = void>
  void forward_communication(const task& t, std::span<const std::int64_t> dim_sum,
                             std::span<const double> start_ms, std::span<double> fwd_ms,
                             bool clamp = true) const {
    const state& s = require();
    const double scale = validate(s, t, dim_sum, &start_ms, "fwd_ms.size", fwd_ms.size());
    run_forward(s, dim_sum, start_ms, scale, clamp,
                [&](std::size_t d, double ms) { fwd_ms[d] = ms; });
  }

  // backward_communication on several plans (batched_communication,
  // concepts/cost_model.hpp): dim_sums holds rows x devices(), plan after
  // plan; bwd_ms gets rows x devices(), row r bit for bit
  // backward_communication's on row r (the network's batch() evaluates each
  // row as its one-row call does, reading the weights once per chunk of
  // rows). Each row is checked as backward_communication checks it.
  template <class = void>
  void backward_communication_rows(const task& t, std::span<const std::int64_t> dim_sums,
                                   std::span<double> bwd_ms, bool clamp = true) const {
    const state& s = require();
    const std::size_t n = s.meta.devices;
    const std::size_t rows = check_rows(n, dim_sums.size(), "dim_sums.size");
    check_length("bwd_ms.size", bwd_ms.size(), rows * n);
    run_rows(s.packed_backward, n, n, rows, clamp, bwd_ms, [&](std::size_t r, float* x) {
      const auto dims = dim_sums.subspan(r * n, n);
      const double scale = validate(s, t, dims, nullptr, "bwd_ms.size", n);
      Eigen::Map<nn::matrix> row(x, 1, static_cast<Eigen::Index>(n));
      cost::detail::comm_backward_features(dims, scale, row);
    });
  }

  // forward_communication on several plans: dim_sums and start_ms hold
  // rows x devices(), fwd_ms gets rows x devices(), row r bit for bit
  // forward_communication's on row r.
  template <class = void>
  void forward_communication_rows(const task& t, std::span<const std::int64_t> dim_sums,
                                  std::span<const double> start_ms, std::span<double> fwd_ms,
                                  bool clamp = true) const {
    const state& s = require();
    const std::size_t n = s.meta.devices;
    const std::size_t rows = check_rows(n, dim_sums.size(), "dim_sums.size");
    check_length("start_ms.size", start_ms.size(), rows * n);
    check_length("fwd_ms.size", fwd_ms.size(), rows * n);
    run_rows(s.packed_forward, 2 * n, n, rows, clamp, fwd_ms, [&](std::size_t r, float* x) {
      const auto dims = dim_sums.subspan(r * n, n);
      const auto starts = start_ms.subspan(r * n, n);
      const double scale = validate(s, t, dims, &starts, "fwd_ms.size", n);
      Eigen::Map<nn::matrix> row(x, 1, static_cast<Eigen::Index>(2 * n));
      cost::detail::comm_forward_features(dims, starts, scale, row);
    });
  }

  // ------------------------------------------------------------ files
  void save(const std::filesystem::path& path) const {
    const state& s = require();
    std::map<std::string, std::string> meta = s.meta.extra;
    meta["embplan.kind"] = "comm_cost_net";
    meta["embplan.devices"] = std::to_string(s.meta.devices);
    meta["embplan.meter"] = s.meta.meter;
    meta["embplan.batch_size"] = std::to_string(s.meta.batch_size);
    meta["embplan.trained_on"] = s.meta.trained_on;
    meta["embplan.forward_mlp_sizes"] = cost::detail::sizes_text(s.forward.hidden);
    meta["embplan.backward_mlp_sizes"] = cost::detail::sizes_text(s.backward.hidden);
    auto file = nn::state_dict(s.forward, "forward", std::move(meta));
    for (auto& [name, tensor] : nn::state_dict(s.backward, "backward").tensors)
      file.tensors.emplace(name, std::move(tensor));
    io::write_safetensors(path, file);
  }

  static neural_comm load(const std::filesystem::path& path) {
    const auto file = io::read_safetensors(path);
    const std::string src = path.string();
    nn::require_file_kind(file, src, "a communication cost model", {"a communication cost model"});
    const auto get = [&](const std::string& key) -> const std::string& {
      return cost::detail::require_key(file.metadata, src, key,
                                       "a neural_comm file written by neural_comm::save");
    };
    if (get("embplan.kind") != "comm_cost_net") {
      embplan::detail::fail(src + ": metadata.embplan.kind", get("embplan.kind"),
                            "\"comm_cost_net\" (a file of embplan train comm)");
    }
    neural_comm_metadata meta;
    const auto devices = cost::detail::parse_number<std::int64_t>(
        get("embplan.devices"), src + ": metadata.embplan.devices");
    if (devices < 1 || devices > nn::max_width / 2) {  // the forward net reads 2 x devices
      embplan::detail::fail(src + ": metadata.embplan.devices", devices,
                            "1 to " + std::to_string(nn::max_width / 2) + " devices");
    }
    meta.devices = static_cast<std::size_t>(devices);
    meta.meter = get("embplan.meter");
    meta.batch_size = cost::detail::parse_number<std::int64_t>(
        get("embplan.batch_size"), src + ": metadata.embplan.batch_size");
    meta.trained_on = get("embplan.trained_on");
    for (const auto& [k, v] : file.metadata)
      if (k.rfind("embplan.", 0) != 0) meta.extra[k] = v;
    for (const auto& [name, t] : file.tensors) {
      if (name.rfind("forward.", 0) != 0 && name.rfind("backward.", 0) != 0) {
        embplan::detail::fail(src + ": tensors[\"" + name + "\"]", name,
                              "a tensor of the forward or backward model (\"forward.*\", "
                              "\"backward.*\")");
      }
    }
    const auto n = static_cast<Eigen::Index>(meta.devices);
    auto forward = make_net(file, "forward", get("embplan.forward_mlp_sizes"),
                            src + ": metadata.embplan.forward_mlp_sizes", 2 * n, n);
    auto backward = make_net(file, "backward", get("embplan.backward_mlp_sizes"),
                             src + ": metadata.embplan.backward_mlp_sizes", n, n);
    nn::load_state_dict(forward, file, "forward");
    nn::load_state_dict(backward, file, "backward");
    return neural_comm(forward, backward, std::move(meta));
  }

 private:
  struct state {
    state(const nn::comm_cost_net& f, const nn::comm_cost_net& b, neural_comm_metadata m,
          nn::simd_kernel kernel = nn::simd_kernel::automatic)
        : forward(f)
        , backward(b)
        , packed_forward(f, kernel)
        , packed_backward(b, kernel)
        , meta(std::move(m)) {}
    nn::comm_cost_net forward, backward;
    nn::packed_comm_cost_net packed_forward, packed_backward;
    neural_comm_metadata meta;
  };

  // Floats of the input and output rows on the stack (past that, the heap):
  // 2 x 64 devices.
  static constexpr std::size_t row_floats = 128;

  // communication()'s checks, in its order, for the three methods: the task's
  // device count, the spans' lengths (start_ms where given; the output span
  // named by out_field), every dim sum and start, the batch. Returns the dim
  // sums' scale (task batch / measured batch).
  static double validate(const state& s, const task& t, std::span<const std::int64_t> dim_sum,
                         const std::span<const double>* start_ms, const char* out_field,
                         std::size_t out_size) {
    const std::size_t n = s.meta.devices;
    if (t.cluster.size() != n) {
      embplan::detail::fail(
          "task.cluster.size", t.cluster.size(),
          std::to_string(n) + " devices: this communication model was trained for " +
              std::to_string(n) + " devices, the task has " + std::to_string(t.cluster.size()) +
              " (train one for this count: embplan train comm)");
    }
    check_length("dim_sum.size", dim_sum.size(), n);
    if (start_ms != nullptr) check_length("start_ms.size", start_ms->size(), n);
    check_length(out_field, out_size, n);
    for (std::size_t d = 0; d < n; ++d) {
      if (dim_sum[d] < 0) {
        embplan::detail::fail("neural_comm.dim_sum[" + std::to_string(d) + "]", dim_sum[d],
                              "a non-negative dim sum");
      }
      if (start_ms != nullptr && !std::isfinite((*start_ms)[d])) {
        embplan::detail::fail("neural_comm.start_ms[" + std::to_string(d) + "]", (*start_ms)[d],
                              "a finite time");
      }
    }
    if (t.batch_size < 1) {
      embplan::detail::fail("task.batch_size", t.batch_size, "a positive batch size");
    }
    return static_cast<double>(t.batch_size) / static_cast<double>(s.meta.batch_size);
  }

  // One network on its input row x: put(d, ms) for every device, ms the
  // output as a double, clamped at 0 where asked.
  template <class Put>
  static void run(const nn::packed_comm_cost_net& net, std::span<const float> x, std::size_t n,
                  bool clamp, Put&& put) {
    nn::detail::scratch_floats<row_floats> buf(n);
    const std::span<float> y(buf.data(), n);
    net(x, y);
    for (std::size_t d = 0; d < n; ++d) {
      const auto ms = static_cast<double>(y[d]);
      put(d, clamp ? std::max(0.0, ms) : ms);
    }
  }

  template <class Put>
  static void run_forward(const state& s, std::span<const std::int64_t> dim_sum,
                          std::span<const double> start_ms, double scale, bool clamp, Put&& put) {
    const std::size_t n = s.meta.devices;
    nn::detail::scratch_floats<row_floats> buf(2 * n);
    Eigen::Map<nn::matrix> x(buf.data(), 1, static_cast<Eigen::Index>(2 * n));
    cost::detail::comm_forward_features(dim_sum, start_ms, scale, x);
    run(s.packed_forward, std::span<const float>(buf.data(), 2 * n), n, clamp, put);
  }

  template <class Put>
  static void run_backward(const state& s, std::span<const std::int64_t> dim_sum, double scale,
                           bool clamp, Put&& put) {
    const std::size_t n = s.meta.devices;
    nn::detail::scratch_floats<row_floats> buf(n);
    Eigen::Map<nn::matrix> x(buf.data(), 1, static_cast<Eigen::Index>(n));
    cost::detail::comm_backward_features(dim_sum, scale, x);
    run(s.packed_backward, std::span<const float>(buf.data(), n), n, clamp, put);
  }

  // The *_rows methods' rows per network call: the input and output floats
  // of this many rows on the stack (64 devices at most).
  static constexpr std::size_t chunk_rows = 12;

  // One network on `rows` input rows of `in` floats, written by fill(r, x)
  // (row r's features into x), chunk_rows at a time; out[r * n + d] = the
  // output as a double, clamped at 0 where asked, as run() gives it.
  template <class Fill>
  static void run_rows(const nn::packed_comm_cost_net& net, std::size_t in, std::size_t n,
                       std::size_t rows, bool clamp, std::span<double> out, Fill&& fill) {
    nn::detail::scratch_floats<chunk_rows * row_floats> x(chunk_rows * in);
    nn::detail::scratch_floats<chunk_rows * row_floats> y(chunk_rows * n);
    for (std::size_t first = 0; first < rows; first += chunk_rows) {
      const std::size_t m = std::min(chunk_rows, rows - first);
      for (std::size_t r = 0; r < m; ++r)
        fill(first + r, x.data() + r * in);
      net.batch(std::span<const float>(x.data(), m * in), std::span<float>(y.data(), m * n));
      for (std::size_t i = 0; i < m * n; ++i) {
        const auto ms = static_cast<double>(y.data()[i]);
        out[first * n + i] = clamp ? std::max(0.0, ms) : ms;
      }
    }
  }

  // The row count of a rows x devices span of `size` entries.
  static std::size_t check_rows(std::size_t n, std::size_t size, const char* field) {
    if (size % n != 0) {
      embplan::detail::fail(
          std::string("neural_comm.") + field, size,
          "a multiple of the device count " + std::to_string(n) + " (rows x devices)");
    }
    return size / n;
  }

  const state& require() const {
    if (!state_) {
      embplan::detail::fail("neural_comm", "(empty)", "a model (construct or load one)");
    }
    return *state_;
  }

  static void check_length(const char* field, std::size_t got, std::size_t want) {
    if (got != want) {
      embplan::detail::fail(std::string("neural_comm.") + field, got,
                            "one entry per device (" + std::to_string(want) + ")");
    }
  }

  static void check_net(const nn::comm_cost_net& net, const std::string& field, Eigen::Index in,
                        Eigen::Index out, const char* what) {
    if (net.hidden.layers.empty() || net.hidden.in_features() != in ||
        net.feature_norm.features() != in) {
      embplan::detail::fail(field + ".in_features", net.hidden.in_features(),
                            std::to_string(in) + " = " + what);
    }
    if (net.hidden.out_features() != out) {
      embplan::detail::fail(field + ".out_features", net.hidden.out_features(),
                            std::to_string(out) + " = one cost per device");
    }
  }

  // A zero net whose sizes are "in,h1,...,out" from the metadata, checked
  // against the device count and, before anything is allocated, against the
  // weights under `prefix` in the file.
  static nn::comm_cost_net make_net(const io::safetensors_file& file, const std::string& prefix,
                                    const std::string& text, const std::string& field,
                                    Eigen::Index in, Eigen::Index out) {
    auto sizes = cost::detail::parse_sizes(text, field);
    if (sizes.size() < 2 || sizes.front() != in || sizes.back() != out) {
      embplan::detail::fail(field, text,
                            "sizes from " + std::to_string(in) + " inputs to " +
                                std::to_string(out) + " outputs (the device count's)");
    }
    nn::require_declared_weights(
        file,
        nn::mlp::weight_shapes({.sizes = sizes, .naming = nn::mlp_naming::module_list},
                               prefix + ".hidden"),
        field, text);
    nn::comm_cost_net_options o;
    o.features = in;
    o.outputs = out;
    o.hidden.assign(sizes.begin() + 1, sizes.end() - 1);
    return nn::comm_cost_net(o);
  }

  std::shared_ptr<const state> state_;
};
static_assert(split_communication<neural_comm>);
static_assert(batched_communication<neural_comm>);

}  // namespace embplan::inline EMBPLAN_ABI
