// attrcheck-test: np=2 modes=shadow,emulate
// expect-portable-on openmpi-4.1/shadow: portability.create-group-copies-attributes openmpi-6.0 mpich-4.0 mpich-4.2 mpich-5.0
// expect-portable-on openmpi-5.0/shadow: portability.create-group-copies-attributes openmpi-6.0 mpich-4.0 mpich-4.2 mpich-5.0
// expect-portable-on openmpi-4.1/emulate: portability.create-group-copies-attributes openmpi-4.1 openmpi-5.0
// expect-portable-on openmpi-5.0/emulate: portability.create-group-copies-attributes openmpi-4.1 openmpi-5.0
// expect-portable-on openmpi-6.0: portability.create-group-copies-attributes openmpi-4.1 openmpi-5.0
// expect-portable-on mpich: portability.create-group-copies-attributes openmpi-4.1 openmpi-5.0
// divergence: create-group-copies-attributes
// clean
// exit: 0
/* A program that reads an attribute on a communicator from MPI_Comm_create_group: Open MPI 4.1
 * and 5.0 run the parent's copy callbacks there (the standard: only the dup family copies), so the
 * get finds the copy; MPICH and Open MPI 6.0 copy nothing, and it finds none. In emulate mode
 * attrcheck's cache copies nothing, as the standard says. Either way the answer depends on the
 * library: the portability finding at the get names the series that answer otherwise. The keyval
 * set on the new communicator by the program itself (key_own) depends on nothing. */
#include <mpi.h>
#include <stdio.h>

static int copy(MPI_Comm old, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)old; (void)keyval; (void)extra;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int key, key_own, flag = 0, own = 0;
  void* value = NULL;
  static int payload = 42;
  MPI_Comm_create_keyval(copy, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm_create_keyval(copy, MPI_COMM_NULL_DELETE_FN, &key_own, NULL);
  MPI_Comm parent, made;
  MPI_Comm_dup(MPI_COMM_WORLD, &parent);
  MPI_Comm_set_attr(parent, key, &payload);
  MPI_Comm_set_attr(parent, key_own, &payload);
  MPI_Group group;
  MPI_Comm_group(parent, &group);
  MPI_Comm_create_group(parent, group, 7, &made);
  MPI_Group_free(&group);
  MPI_Comm_set_attr(made, key_own, &payload);
  MPI_Comm_get_attr(made, key, &value, &flag); /* depends on the library */
  MPI_Comm_get_attr(made, key_own, &value, &own);
  if (!own) return 1;
  MPI_Comm_free(&made);
  MPI_Comm_free(&parent);
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&key_own);
  MPI_Finalize();
  return 0;
}
