// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// native-skip: 77
/* MPI_Type_get_contents_c (MPI-4.0) on a struct made with large counts, as mpi4py 4 makes them:
 * the derived datatypes it returns are the program's to free (MPI-4.0 5.1.13), and a second call
 * after that free hands the same inner datatype out again (Open MPI 6.0: the address of the
 * datatype freed just before). Every free is legal and must succeed, as natively; a datatype
 * made with large counts has an envelope only through MPI_Type_get_envelope_c (Open MPI 6.0's
 * MPI_Type_get_envelope fails on it with MPI_ERR_TYPE). A library whose mpi.h is of MPI 3.1 (Open
 * MPI 4.1 and 5.0) has no large-count functions: the program says so and exits 77, skipped. */
#include <mpi.h>
#include <stdio.h>

enum { kNotHere = 77 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if MPI_VERSION >= 4
  MPI_Datatype inner, outer;
  MPI_Type_contiguous(2, MPI_INT, &inner);
  const MPI_Count lengths[2] = {1, 1}, displs[2] = {0, 16};
  const MPI_Datatype types[2] = {inner, MPI_DOUBLE};
  MPI_Type_create_struct_c(2, lengths, displs, types, &outer);
  MPI_Type_commit(&outer);
  MPI_Count ni = 0, na = 0, nc = 0, nd = 0;
  int combiner = 0;
  MPI_Type_get_envelope_c(outer, &ni, &na, &nc, &nd, &combiner);
  int failed = 0, freed = 0;
  for (int round = 0; round < 3; ++round) {
    int ints[8];
    MPI_Aint addrs[8];
    MPI_Count counts[8];
    MPI_Datatype got[8];
    if (ni > 8 || na > 8 || nc > 8 || nd != 2 ||
        MPI_Type_get_contents_c(outer, ni, na, nc, nd, ints, addrs, counts, got) != MPI_SUCCESS) {
      ++failed;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      int named = 0, a = 0, b = 0, c = 0;
      MPI_Type_get_envelope(got[i], &a, &b, &c, &named);
      if (named == MPI_COMBINER_NAMED) continue;  // MPI_DOUBLE: predefined, not freed
      if (MPI_Type_free(&got[i]) != MPI_SUCCESS) ++failed;
      else ++freed;
    }
  }
  MPI_Type_free(&outer);
  if (MPI_Type_free(&inner) != MPI_SUCCESS) ++failed;
  printf("type_get_contents_c: %d inner datatypes freed, %d calls failed\n", freed, failed);
#else
  fprintf(stderr, "type_get_contents_c: MPI %d.%d has no large-count (_c) functions\n", MPI_VERSION, MPI_SUBVERSION);
  MPI_Finalize();
  return kNotHere;
#endif
  MPI_Finalize();
  return 0;
}
