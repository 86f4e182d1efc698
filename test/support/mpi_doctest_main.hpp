#pragma once
// The main of a doctest executable run under mpirun: MPI initialised around
// doctest, and any rank's failure fails the run. Include it in exactly one
// file of the executable, after MPI and doctest (DOCTEST_CONFIG_IMPLEMENT).

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  doctest::Context context(argc, argv);
  const int failed = context.run();
  // Any rank's failure fails the run.
  int worst = 0;
  MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
