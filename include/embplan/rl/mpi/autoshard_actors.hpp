#pragma once
// AutoShard's actors as MPI ranks (target embplan::mpi): Algorithm 1's actors
// spread over machines, each rank measuring the plans it plays on its own
// device, every rank a learner. autoshard_mpi_player(comm, ...) is an
// rl::autoshard_player: rank r of S plays episodes r, r + S, ... of each
// update's batch exactly as one process plays them, the ranks exchange their
// episodes (MPI_Allgather / MPI_Allgatherv, as bytes with a format version
// and a byte-order check), and every rank takes the same deterministic
// learner step, so with a deterministic meter the policy equals a
// one-process run's bit for bit, whatever the number of ranks.
// Collective: every rank calls rl::autoshard_train with the same tasks,
// options and initial state and a player on the same communicator. A rank
// that fails to play still takes part in the exchange with its message, and
// every rank then throws the same embplan::error naming the lowest failing
// rank; no rank waits for one that gave up.
// Design notes: docs/design/autoshard.md.
#include "embplan/detail/mpi.hpp"  // first: it picks MPI's C API
#include "embplan/version.hpp"

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/task.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/autoshard_train.hpp"

namespace embplan::inline EMBPLAN_ABI::rl::mpi {

// The encoding's version: decode_autoshard_sample refuses another.
inline constexpr std::uint32_t autoshard_sample_format_version = 1;

namespace detail {

// "EPAS" in memory on a little-endian rank; a rank of the other byte order
// reads it swapped.
inline constexpr std::uint32_t autoshard_sample_magic = 0x53415045;

class byte_writer {
 public:
  explicit byte_writer(std::vector<std::byte>& out) : out_(out) {}

  template <class T>
  requires std::is_trivially_copyable_v<T>
  void scalar(T value) { raw(&value, sizeof value); }
  template <class T>
  void values(const std::vector<T>& v) {
    scalar<std::uint64_t>(v.size());
    raw(v.data(), v.size() * sizeof(T));
  }
  void matrix(const nn::matrix& m) {
    scalar<std::int64_t>(m.rows());
    scalar<std::int64_t>(m.cols());
    raw(m.data(), static_cast<std::size_t>(m.size()) * sizeof(float));
  }
  // Bytes as they are (an encoding inside this one), their count first.
  void chunk(std::span<const std::byte> bytes) {
    scalar<std::uint64_t>(bytes.size());
    raw(bytes.data(), bytes.size());
  }
  void text(std::string_view s) { chunk(std::as_bytes(std::span(s.data(), s.size()))); }

 private:
  void raw(const void* p, std::size_t bytes) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + bytes);
  }
  std::vector<std::byte>& out_;
};

// Reads what byte_writer wrote; a field that runs past the end, or a count
// the bytes left cannot hold, fails naming the field.
class byte_reader {
 public:
  explicit byte_reader(std::span<const std::byte> in) : in_(in) {}

  template <class T>
  requires std::is_trivially_copyable_v<T> T scalar(std::string_view field) {
    T value;
    std::memcpy(&value, take(field, sizeof value), sizeof value);
    return value;
  }
  template <class T>
  std::vector<T> values(std::string_view field) {
    const auto n = count(embplan::detail::path(field, "size"), sizeof(T));
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), take(field, n * sizeof(T)), n * sizeof(T));
    return v;
  }
  nn::matrix matrix(std::string_view field) {
    const auto rows = dimension(embplan::detail::path(field, "rows"));
    const auto cols = dimension(embplan::detail::path(field, "cols"));
    if (cols > 0 && rows > left() / sizeof(float) / static_cast<std::size_t>(cols)) {
      embplan::detail::fail(embplan::detail::path(field, "rows"), rows,
                            "at most " + std::to_string(left() / sizeof(float) / cols) +
                                " rows of " + std::to_string(cols) + " (the bytes left)");
    }
    nn::matrix m(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
    const std::size_t bytes = static_cast<std::size_t>(m.size()) * sizeof(float);
    if (bytes > 0) std::memcpy(m.data(), take(field, bytes), bytes);
    return m;
  }
  std::span<const std::byte> chunk(std::string_view field) {
    const auto n = count(embplan::detail::path(field, "size"), 1);
    return {take(field, n), n};
  }
  std::string text(std::string_view field) {
    const auto b = chunk(field);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  bool flag(std::string_view field) {
    const auto v = scalar<std::uint8_t>(field);
    if (v > 1) embplan::detail::fail(field, static_cast<int>(v), "0 or 1");
    return v == 1;
  }
  // The encoding ends here.
  void finish(std::string_view field) const {
    if (left() != 0) embplan::detail::fail(field, left(), "no bytes after the last field");
  }
  std::size_t left() const noexcept { return in_.size() - at_; }

 private:
  const std::byte* take(std::string_view field, std::size_t bytes) {
    if (bytes > left()) {
      embplan::detail::fail(embplan::detail::path(field, "bytes_left"), left(),
                            "at least " + std::to_string(bytes) + " (the encoding ends early)");
    }
    const std::byte* p = in_.data() + at_;
    at_ += bytes;
    return p;
  }
  std::size_t count(const std::string& field, std::size_t element_bytes) {
    const auto n = scalar<std::uint64_t>(field);
    if (n > left() / element_bytes) {
      embplan::detail::fail(
          field, n,
          "at most " + std::to_string(left() / element_bytes) + " elements (the bytes left)");
    }
    return static_cast<std::size_t>(n);
  }
  std::size_t dimension(const std::string& field) {
    const auto n = scalar<std::int64_t>(field);
    if (n < 0) embplan::detail::fail(field, n, "a non-negative count");
    return static_cast<std::size_t>(n);
  }

  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

}  // namespace detail

// Appends `s` to `out` as bytes (see the top of this file).
inline void encode_autoshard_sample(const autoshard_sample& s, std::vector<std::byte>& out) {
  detail::byte_writer w(out);
  w.scalar(detail::autoshard_sample_magic);
  w.scalar(autoshard_sample_format_version);
  w.scalar(s.task);
  const auto& traj = s.trajectory;
  w.matrix(traj.inputs.tables);
  w.matrix(traj.inputs.state_other);
  w.matrix(traj.inputs.held_tables);
  w.values(traj.inputs.action_count);
  w.values(traj.inputs.held_count);
  w.matrix(traj.inputs.actions_other);
  w.values(traj.action);
  w.values(traj.behaviour_logp);
  w.values(traj.reward);
  w.scalar(s.reward);
  w.scalar(static_cast<std::uint8_t>(s.fits ? 1 : 0));
  w.scalar(s.balance);
  w.scalar<std::uint64_t>(s.shard_tables.size());
  for (const auto& m : s.shard_tables)
    w.matrix(m);
  w.values(s.shard_ms);
}

inline std::vector<std::byte> encode_autoshard_sample(const autoshard_sample& s) {
  std::vector<std::byte> out;
  encode_autoshard_sample(s, out);
  return out;
}

// The sample `bytes` encode, exactly (every float and double bit for bit).
// Bytes of another format version, another byte order, cut short or followed
// by more fail with embplan::error naming the field (autoshard_sample.*).
inline autoshard_sample decode_autoshard_sample(std::span<const std::byte> bytes) {
  detail::byte_reader r(bytes);
  const auto magic = r.scalar<std::uint32_t>("autoshard_sample.magic");
  if (magic != detail::autoshard_sample_magic) {
    embplan::detail::fail("autoshard_sample.magic", magic,
                          std::to_string(detail::autoshard_sample_magic) +
                              " (an encoded autoshard_sample, in this rank's byte order)");
  }
  const auto version = r.scalar<std::uint32_t>("autoshard_sample.version");
  if (version != autoshard_sample_format_version) {
    embplan::detail::fail(
        "autoshard_sample.version", version,
        std::to_string(autoshard_sample_format_version) + " (this build's encoding)");
  }
  autoshard_sample s;
  s.task = r.scalar<std::uint32_t>("autoshard_sample.task");
  auto& traj = s.trajectory;
  traj.inputs.tables = r.matrix("autoshard_sample.trajectory.inputs.tables");
  traj.inputs.state_other = r.matrix("autoshard_sample.trajectory.inputs.state_other");
  traj.inputs.held_tables = r.matrix("autoshard_sample.trajectory.inputs.held_tables");
  traj.inputs.action_count =
      r.values<std::int64_t>("autoshard_sample.trajectory.inputs.action_count");
  traj.inputs.held_count = r.values<std::int64_t>("autoshard_sample.trajectory.inputs.held_count");
  traj.inputs.actions_other = r.matrix("autoshard_sample.trajectory.inputs.actions_other");
  traj.action = r.values<std::int64_t>("autoshard_sample.trajectory.action");
  traj.behaviour_logp = r.values<double>("autoshard_sample.trajectory.behaviour_logp");
  traj.reward = r.values<double>("autoshard_sample.trajectory.reward");
  s.reward = r.scalar<double>("autoshard_sample.reward");
  s.fits = r.flag("autoshard_sample.fits");
  s.balance = r.scalar<double>("autoshard_sample.balance");
  // Each matrix holds at least its two 8-byte dimensions.
  const auto shards = r.scalar<std::uint64_t>("autoshard_sample.shard_tables.size");
  if (shards > r.left() / 16) {
    embplan::detail::fail("autoshard_sample.shard_tables.size", shards,
                          "at most " + std::to_string(r.left() / 16) + " (the bytes left)");
  }
  for (std::uint64_t k = 0; k < shards; ++k)
    s.shard_tables.push_back(r.matrix(
        embplan::detail::path("autoshard_sample.shard_tables", static_cast<std::size_t>(k))));
  s.shard_ms = r.values<double>("autoshard_sample.shard_ms");
  r.finish("autoshard_sample.bytes_after");
  return s;
}

namespace detail {

// Every rank's bytes, on every rank: the counts by MPI_Allgather, the bytes by
// MPI_Allgatherv. out_offsets[r] .. out_offsets[r + 1] are rank r's. A total
// over MPI's int counts fails on every rank alike (they all see the same
// counts), before the second collective.
inline std::vector<std::byte> allgather_bytes(MPI_Comm comm, std::span<const std::byte> mine,
                                              std::vector<std::size_t>& out_offsets) {
  const auto check = embplan::detail::mpi_check;
  int size = 0;
  check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const auto ranks = static_cast<std::size_t>(size);
  const std::uint64_t n = mine.size();
  std::vector<std::uint64_t> sizes(ranks);
  check(MPI_Allgather(&n, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm), "MPI_Allgather");
  std::vector<int> counts(ranks);
  std::vector<int> displs(ranks);
  out_offsets.assign(ranks + 1, 0);
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    if (sizes[r] > static_cast<std::uint64_t>(INT_MAX) - total) {
      embplan::detail::fail("autoshard_actors.bytes", total + sizes[r],
                            "below 2^31 bytes per learner update (a smaller batch)");
    }
    counts[r] = static_cast<int>(sizes[r]);
    displs[r] = static_cast<int>(total);
    total += sizes[r];
    out_offsets[r + 1] = static_cast<std::size_t>(total);
  }
  std::vector<std::byte> all(static_cast<std::size_t>(total));
  int rank = 0;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check(MPI_Allgatherv(mine.data(), counts[static_cast<std::size_t>(rank)], MPI_BYTE, all.data(),
                       counts.data(), displs.data(), MPI_BYTE, comm),
        "MPI_Allgatherv");
  return all;
}

// What every rank's share begins with: every rank checks that all ranks play
// the same update of the same schedule (they all see the same bytes, so they
// all reach the same verdict and none is left waiting).
struct share_header {
  std::int64_t update = 0;
  std::int64_t batch = 0;
  std::uint64_t seed = 0;

  bool operator==(const share_header&) const = default;
  std::string text() const {
    return "update " + std::to_string(update) + " of batch " + std::to_string(batch) +
           " with seed " + std::to_string(seed);
  }
};

// A rank's share of a batch on the wire: the header, then [failed = 0][(size,
// sample) ...] in episode order, or [failed = 1][message].
inline void encode_header(byte_writer& w, const share_header& h, bool failed) {
  w.scalar(h.update);
  w.scalar(h.batch);
  w.scalar(h.seed);
  w.scalar<std::uint8_t>(failed ? 1 : 0);
}

inline std::vector<std::byte> encode_share(const share_header& h,
                                           std::span<const autoshard_sample> batch,
                                           std::size_t rank, std::size_t ranks) {
  std::vector<std::byte> out;
  byte_writer w(out);
  encode_header(w, h, false);
  std::vector<std::byte> sample;
  for (std::size_t k = rank; k < batch.size(); k += ranks) {
    sample.clear();
    encode_autoshard_sample(batch[k], sample);
    w.chunk(sample);
  }
  return out;
}

inline std::vector<std::byte> encode_failure(const share_header& h, std::string_view what) {
  std::vector<std::byte> out;
  byte_writer w(out);
  encode_header(w, h, true);
  w.text(what);
  return out;
}

// The batch from every rank's share. Ranks at different updates or options,
// or a rank that failed, fail every rank alike, naming the lowest such rank.
inline std::vector<autoshard_sample> decode_shares(std::span<const std::byte> all,
                                                   std::span<const std::size_t> offsets,
                                                   const share_header& mine) {
  const std::size_t ranks = offsets.size() - 1;
  std::vector<byte_reader> in;
  std::vector<share_header> headers;
  std::vector<bool> failed;
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::string field = embplan::detail::path("autoshard_actors.rank", r);
    in.emplace_back(all.subspan(offsets[r], offsets[r + 1] - offsets[r]));
    headers.push_back({.update = in[r].scalar<std::int64_t>(field + ".update"),
                       .batch = in[r].scalar<std::int64_t>(field + ".batch"),
                       .seed = in[r].scalar<std::uint64_t>(field + ".seed")});
    failed.push_back(in[r].flag(field + ".failed"));
  }
  for (std::size_t r = 1; r < ranks; ++r) {
    if (headers[r] != headers[0]) {
      throw embplan::error("autoshard actors: rank " + std::to_string(r) + " plays " +
                           headers[r].text() + ", rank 0 " + headers[0].text() +
                           ": every rank must call autoshard_train with the same tasks, options "
                           "and state");
    }
  }
  std::string first_failure;
  std::size_t failures = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    if (!failed[r]) continue;
    const std::string what =
        in[r].text(embplan::detail::path("autoshard_actors.rank", r) + ".message");
    if (failures++ == 0) {
      first_failure = "autoshard actors: rank " + std::to_string(r) +
                      " failed to play/measure update " + std::to_string(mine.update) + ": " + what;
    }
  }
  if (failures > 1) {
    first_failure += " (and " + std::to_string(failures - 1) + " more rank" +
                     (failures > 2 ? "s" : "") + " failed)";
  }
  if (failures > 0) throw embplan::error(first_failure);
  const auto batch = static_cast<std::size_t>(mine.batch);
  std::vector<autoshard_sample> out(batch);
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::string field = embplan::detail::path("autoshard_actors.rank", r);
    for (std::size_t k = r; k < batch; k += ranks)
      out[k] = decode_autoshard_sample(in[r].chunk(field + ".sample"));
    in[r].finish(field + ".bytes_after");
  }
  return out;
}

}  // namespace detail

// The ranks of `comm` as AutoShard's actors (see the top of this file): each
// plays its share of every batch with `meter` (compute() per device, on this
// rank's device), the actions among the devices `rule` admits (the paper:
// every device, all_of<>{}), `o.actors` threads per rank. The meter and the
// tasks must outlive the player; MPI must be initialised.
template <cost_model Meter, constraint Constraint = all_of<>>
autoshard_player autoshard_mpi_player(MPI_Comm comm, std::span<const task> tasks,
                                      const Meter& meter, const autoshard_train_options& o,
                                      const Constraint& rule = {}) {
  const auto check = embplan::detail::mpi_check;
  int rank = 0;
  int size = 0;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const auto me = static_cast<std::size_t>(rank);
  const auto ranks = static_cast<std::size_t>(size);
  return {.play =
              [comm, tasks, &meter, o, rule, me, ranks](const autoshard_policy& policy,
                                                        std::int64_t update) {
                const detail::share_header header{
                    .update = update, .batch = o.batch, .seed = o.seed};
                std::vector<std::byte> mine;
                // Whatever happens here, this rank joins the exchange.
                try {
                  const auto batch =
                      rl::detail::autoshard_play(tasks, meter, rule, o, policy, update, me, ranks);
                  mine = detail::encode_share(header, batch, me, ranks);
                } catch (const std::exception& e) {
                  mine = detail::encode_failure(header, e.what());
                } catch (...) {
                  mine = detail::encode_failure(header, "an exception of unknown type");
                }
                std::vector<std::size_t> offsets;
                const auto all = detail::allgather_bytes(comm, mine, offsets);
                return detail::decode_shares(all, offsets, header);
              },
          .concurrent = false};
}

}  // namespace embplan::inline EMBPLAN_ABI::rl::mpi
