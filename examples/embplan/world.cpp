// The MPI world (world.hpp) and what `train dreamshard|autoshard` do across
// the ranks (train.hpp), compiled into each program with that program's MPI
// setting: with EMBPLAN_WITH_MPI they speak MPI; without it the world has one
// rank, the training never asks for the ranks, and asked anyway they throw.
#if defined(EMBPLAN_WITH_MPI)
#include "embplan/meter/mpi/alltoall.hpp"  // first: it picks MPI's C API
#include "embplan/meter/mpi/plan_meter.hpp"
#include "embplan/rl/mpi/autoshard_actors.hpp"
#endif
#include "world.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "train.hpp"

namespace embplan_cli {

world::world() {
#if defined(EMBPLAN_WITH_MPI)
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
      std::getenv("PMIX_RANK") != nullptr) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised == 0) {
      MPI_Init(nullptr, nullptr);
      owns_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
#endif
}

world::~world() {
#if defined(EMBPLAN_WITH_MPI)
  if (owns_) MPI_Finalize();
#endif
}

void world::barrier() const {
#if defined(EMBPLAN_WITH_MPI)
  if (size_ > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

std::vector<std::string> world::gather(const std::string& mine) const {
  if (size_ == 1) return {mine};
#if defined(EMBPLAN_WITH_MPI)
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> displs(static_cast<std::size_t>(size_), 0);
  int total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    displs[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<std::size_t>(rank_ == 0 ? total : 0), '\0');
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (rank_ == 0) {
    for (std::size_t r = 0; r < lengths.size(); ++r)
      out.push_back(
          all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lengths[r])));
  }
  return out;
#else
  return {mine};
#endif
}

double world::broadcast(double value) const {
#if defined(EMBPLAN_WITH_MPI)
  if (size_ > 1) MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
#endif
  return value;
}

void world::abort(int code) const {
#if defined(EMBPLAN_WITH_MPI)
  if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

namespace {

// Only a world of several ranks (mpirun, EMBPLAN_WITH_MPI) measures across them.
void check_ranks(const world& w, const char* what) {
#if defined(EMBPLAN_WITH_MPI)
  if (w.size() > 1) return;
#endif
  embplan::detail::fail(what, w.size(), "a world of two or more MPI ranks (mpirun)");
}

}  // namespace

embplan::plan_cost measure_plan_on_ranks(const world& w, const embplan::task& t,
                                         const embplan::plan& p, std::uint64_t flush_bytes) {
  check_ranks(w, "measure_plan_on_ranks.world.size");
#if defined(EMBPLAN_WITH_MPI)
  embplan::meter::mpi::plan_meter_options mo;
  mo.compute.options.flush_bytes = flush_bytes;
  return embplan::meter::mpi::measure_plan(MPI_COMM_WORLD, t, p, mo);
#else
  (void)t;
  (void)p;
  (void)flush_bytes;
  return {};  // not reached: check_ranks throws
#endif
}

embplan::rl::autoshard_player autoshard_player_on_ranks(
    const world& w, std::span<const embplan::task> tasks, const any_meter& meter,
    const embplan::rl::autoshard_train_options& o) {
  check_ranks(w, "autoshard_player_on_ranks.world.size");
#if defined(EMBPLAN_WITH_MPI)
  return embplan::rl::mpi::autoshard_mpi_player(MPI_COMM_WORLD, tasks, meter, o,
                                                embplan::all_of<>{});
#else
  (void)tasks;
  (void)meter;
  (void)o;
  return {};  // not reached: check_ranks throws
#endif
}

}  // namespace embplan_cli
