/* A correct program that attrcheck meets built for another MPI library (run_stacking.py, the
 * other-mpi cases): a keyval with callbacks, an attribute copied by a dup and deleted by the
 * frees, a predefined attribute read. Its stdout is the same on every library and under
 * attrcheck. Only standard calls, so that it compiles against a library's own mpi.h and against
 * the MPI standard ABI's. */
#include <mpi.h>
#include <stdio.h>

static int copies, deletes;

static int copy_fn(MPI_Comm comm, int key, void* extra, void* in, void* out, int* flag) {
  (void)comm, (void)key, (void)extra;
  ++copies;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int key, void* value, void* extra) {
  (void)comm, (void)key, (void)value, (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, key = MPI_KEYVAL_INVALID, flag = 0, tag_flag = 0;
  void* value = NULL;
  void* tag_ub = NULL;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL);
  MPI_Comm a, b;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_set_attr(a, key, (void*)42);
  MPI_Comm_dup(a, &b);
  MPI_Comm_get_attr(b, key, &value, &flag);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &tag_flag);
  MPI_Comm_free(&b);
  MPI_Comm_free(&a);
  MPI_Comm_free_keyval(&key);
  MPI_Datatype t;
  MPI_Type_contiguous(2, MPI_INT, &t);
  MPI_Type_commit(&t);
  MPI_Type_free(&t);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("other_app: copies %d, deletes %d, copied value %ld (flag %d), MPI_TAG_UB found %d, rank sum %d\n", copies,
           deletes, (long)value, flag, tag_flag, sum);
  MPI_Finalize();
  return 0;
}
