#pragma once
// The MPI world of `embplan collect` and `plan --meter measured` under
// mpirun (one rank per device), or a world of one.
#if defined(EMBPLAN_WITH_MPI)
#include "embplan/meter/mpi/alltoall.hpp"  // first: it picks MPI's C API
#include "embplan/meter/mpi/plan_meter.hpp"
#endif

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"

namespace embplan_cli {

// The MPI world when launched by mpirun, else a world of one. MPI is only
// initialised under a launcher (a singleton MPI_Init would spawn a daemon).
class world {
 public:
  world() {
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
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  ~world() {
#if defined(EMBPLAN_WITH_MPI)
    if (owns_) MPI_Finalize();
#endif
  }

  int rank() const noexcept {
    return rank_;
  }
  int size() const noexcept {
    return size_;
  }

  void barrier() const {
#if defined(EMBPLAN_WITH_MPI)
    if (size_ > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
  }

  // Every rank's string, on rank 0 (others get an empty vector).
  std::vector<std::string> gather(const std::string& mine) const {
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
    MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), MPI_CHAR,
                0, MPI_COMM_WORLD);
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

  // Rank 0's value, on every rank.
  double broadcast(double value) const {
#if defined(EMBPLAN_WITH_MPI)
    if (size_ > 1) MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
#endif
    return value;
  }

  // run() on every rank; an error on one rank would leave the others waiting
  // in a collective, so there every rank says why and the world ends
  // (`bad_input` for an embplan::error, 1 for anything else).
  template <class Run>
  int run_or_abort(Run&& run, int bad_input) const {
    try {
      return run();
    } catch (const embplan::error& e) {
      std::cerr << "embplan: error: " << e.what() << '\n';
      abort(bad_input);
    } catch (const std::exception& e) {
      std::cerr << "embplan: internal error: " << e.what() << '\n';
      abort(1);
    }
  }

  // An error on one rank would leave the others waiting in a collective.
  [[noreturn]] void abort(int code) const {
#if defined(EMBPLAN_WITH_MPI)
    if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    std::exit(code);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  bool owns_ = false;
};

}  // namespace embplan_cli
