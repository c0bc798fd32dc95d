// attrcheck-test: np=1 modes=shadow,emulate
// expect: callback.error
// expect-on openmpi/shadow: object.invalid
// clean
// exit: 0
// native: same-stdout
/* After an MPI_Type_dup that failed (its copy callback returned an error, callback.error), Open
 * MPI leaves the output handle 0 rather than MPI_DATATYPE_NULL (MPICH sets MPI_DATATYPE_NULL).
 * A program that frees whatever is not MPI_DATATYPE_NULL hands that 0 to MPI_Type_free, which
 * Open MPI refuses: handle 0 names no object on either library, so that free is object.invalid
 * (refused, with the error the library would have returned), and no impl.divergence. (Emulate
 * mode runs the copy callbacks itself and, on their failure, frees the new datatype and returns
 * MPI_DATATYPE_NULL, as MPICH does.) */
#include <mpi.h>
#include <stdio.h>

static int failing_copy(MPI_Datatype t, int k, void* e, void* in, void* out, int* flag) {
  (void)t; (void)k; (void)e; (void)in; (void)out;
  *flag = 0;
  return MPI_ERR_OTHER;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int key;
  MPI_Type_create_keyval(failing_copy, MPI_TYPE_NULL_DELETE_FN, &key, NULL);
  MPI_Datatype t, copy = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(2, MPI_INT, &t);
  MPI_Type_set_attr(t, key, (void*)1);
  const int rc = MPI_Type_dup(t, &copy);
  printf("dup %s\n", rc == MPI_SUCCESS ? "succeeded" : "failed");
  if (rc != MPI_SUCCESS && copy != MPI_DATATYPE_NULL) MPI_Type_free(&copy);
  MPI_Type_delete_attr(t, key);
  MPI_Type_free(&t);
  MPI_Type_free_keyval(&key);
  MPI_Finalize();
  return 0;
}
