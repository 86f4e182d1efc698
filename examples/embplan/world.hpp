#pragma once
// The MPI world of `embplan collect`, `plan --meter measured` and `train
// dreamshard|autoshard` under mpirun (one rank per device), or a world of one.
//
// Declared here, defined in world.cpp, which each program compiles with its
// own MPI setting (EMBPLAN_WITH_MPI: `embplan` where MPI is found; never
// `embplan_gpu`). So this header reads the same in every translation unit,
// and the CLI's files that use a world without speaking MPI themselves
// (train.cpp, train_autoshard.cpp) are compiled once and linked by both
// programs. A file that calls MPI itself includes its MPI headers first, under
// EMBPLAN_WITH_MPI.
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
  world();
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  ~world();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  void barrier() const;

  // Every rank's string, on rank 0 (others get an empty vector).
  std::vector<std::string> gather(const std::string& mine) const;

  // Rank 0's value, on every rank.
  double broadcast(double value) const;

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
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  bool owns_ = false;
};

}  // namespace embplan_cli
