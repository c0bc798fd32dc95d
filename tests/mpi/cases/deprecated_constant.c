// attrcheck-test: np=2 modes=shadow,emulate
// expect: deprecated.call
// expect-unless null_callbacks_are_null: deprecated.constant
// clean
// exit: 0
/* deprecated.constant: MPI_NULL_COPY_FN, MPI_DUP_FN and MPI_NULL_DELETE_FN passed to
 * MPI_Keyval_create (itself deprecated). The keys are then used correctly. In MPICH's mpi.h the
 * null ones are null pointers and MPI_DUP_FN is MPI_COMM_DUP_FN, the same values as their
 * replacements: nothing at run time tells them apart, so there only deprecated.call is expected
 * (Fortran's are distinct functions in MPICH too: fortran_deprecated.f90). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int null_key, dup_key;
  MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &null_key, NULL); /* deprecated constants */
  MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &dup_key, NULL);        /* deprecated constants */

  MPI_Comm comm, copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, null_key, (void*)1);
  MPI_Comm_set_attr(comm, dup_key, (void*)2);
  MPI_Comm_dup(comm, &copy);
  void* got = NULL;
  int null_flag = 0, dup_flag = 0;
  MPI_Comm_get_attr(copy, null_key, &got, &null_flag);
  MPI_Comm_get_attr(copy, dup_key, &got, &dup_flag);
  const int dup_value_ok = dup_flag && got == (void*)2;
  MPI_Comm_free(&copy);
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&null_key);
  MPI_Comm_free_keyval(&dup_key);

  if (rank == 0)
    printf("deprecated_constant: null-copy copied %d, dup copied %d (value ok %d)\n", null_flag, dup_flag,
           dup_value_ok);
  MPI_Finalize();
  return 0;
}
