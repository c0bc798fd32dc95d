// attrcheck-test: np=2 modes=shadow,emulate
// portable-to: all
// expect: portability.create-group-copies-attributes
// expect-severity: portability.create-group-copies-attributes warning
// gate-fails-on: warning
// divergence: create-group-copies-attributes
// exit: 0
/* --portable-to all makes a portability finding a warning, which a CI gate at warning fails on:
 * the get on a communicator from MPI_Comm_create_group finds the parent's attribute on Open MPI
 * 4.1 and 5.0 only. */
#include <mpi.h>
#include <stddef.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int key, flag = 0;
  void* value = NULL;
  static int payload = 1;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm parent, made;
  MPI_Comm_dup(MPI_COMM_WORLD, &parent);
  MPI_Comm_set_attr(parent, key, &payload);
  MPI_Group group;
  MPI_Comm_group(parent, &group);
  MPI_Comm_create_group(parent, group, 3, &made);
  MPI_Group_free(&group);
  MPI_Comm_get_attr(made, key, &value, &flag);
  MPI_Comm_free(&made);
  MPI_Comm_free(&parent);
  MPI_Comm_free_keyval(&key);
  MPI_Finalize();
  return 0;
}
