/* The launcher's fixed cost: a program that does nothing but start and stop MPI
   (bench/launcher_cost.py runs it with and without attrcheck). */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Finalize();
  return 0;
}
