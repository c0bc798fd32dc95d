// attrcheck-test: np=2 modes=shadow
// divergence: create-group-copies-attributes
// clean
// exit: 0
/* A correct program that Open MPI 4.1 runs differently from the standard: MPI_Comm_create_group
 * must not copy attributes, but Open MPI runs the parent's copy callbacks (a user one and
 * MPI_COMM_DUP_FN) and the new communicator gets the copies. Shadow mode reports it as
 * impl.divergence; the program itself only prints what it saw. */
#include <mpi.h>
#include <stdio.h>

static int copies = 0, deletes = 0;

static int counting_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  ++copies;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int k_user, k_dup;
  MPI_Comm_create_keyval(counting_copy, counting_delete, &k_user, NULL);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, counting_delete, &k_dup, NULL);
  MPI_Comm base;
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  MPI_Comm_set_attr(base, k_user, (void*)1);
  MPI_Comm_set_attr(base, k_dup, (void*)2);

  MPI_Group group;
  MPI_Comm_group(base, &group);
  MPI_Comm c;
  MPI_Comm_create_group(base, group, 5, &c);
  MPI_Group_free(&group);
  void* v = NULL;
  int f_user = 0, f_dup = 0;
  MPI_Comm_get_attr(c, k_user, &v, &f_user);
  MPI_Comm_get_attr(c, k_dup, &v, &f_dup);
  MPI_Comm_free(&c);
  const int deletes_new = deletes;
  MPI_Comm_free(&base);

  if (rank == 0)
    printf("constructors_create_group: new communicator: user attr %d, dup_fn attr %d, copy callbacks %d, delete "
           "callbacks on free %d; on the parent's free %d\n",
           f_user, f_dup, copies, deletes_new, deletes - deletes_new);
  MPI_Comm_free_keyval(&k_user);
  MPI_Comm_free_keyval(&k_dup);
  MPI_Finalize();
  return 0;
}
