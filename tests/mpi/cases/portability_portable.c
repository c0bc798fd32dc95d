// attrcheck-test: np=2 modes=shadow,emulate
// portable-to: all
// clean
// exit: 0
// divergence: create-group-copies-attributes
/* A program that depends on nothing the libraries do differently draws no portability finding,
 * even with --portable-to all: its MPI_COMM_WORLD cleanup is deleted by its MPI_COMM_SELF hook
 * (which every library runs first in MPI_Finalize), it reads attributes only where MPI_Comm_dup
 * copied them or where it set them itself (on a communicator from MPI_Comm_create_group), and it
 * uses the MPI-2 names. (Open MPI 4.1 and 5.0 copy the attribute onto the communicator from
 * MPI_Comm_create_group, the library's divergence, noted: the program sets its own there.) */
#include <mpi.h>
#include <stddef.h>

static int world_key = MPI_KEYVAL_INVALID, self_key = MPI_KEYVAL_INVALID;

static int world_cleanup(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  return MPI_SUCCESS;
}

static int at_finalize(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  MPI_Comm_delete_attr(MPI_COMM_WORLD, world_key);
  MPI_Comm_free_keyval(&world_key);
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  static int payload = 9;
  int flag = 0, key;
  void* value = NULL;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, world_cleanup, &world_key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, world_key, &payload);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &self_key, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, self_key, NULL);
  MPI_Comm_free_keyval(&self_key);

  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm dup, made;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_attr(dup, key, &payload);
  MPI_Comm copy;
  MPI_Comm_dup(dup, &copy);
  MPI_Comm_get_attr(copy, key, &value, &flag); /* the dup family copies everywhere */
  if (!flag) return 1;
  MPI_Group group;
  MPI_Comm_group(copy, &group);
  MPI_Comm_create_group(copy, group, 5, &made);
  MPI_Group_free(&group);
  MPI_Comm_set_attr(made, key, &payload); /* set here: whatever the constructor carried */
  MPI_Comm_get_attr(made, key, &value, &flag);
  if (!flag) return 1;
  MPI_Comm_free(&made);
  MPI_Comm_free(&copy);
  MPI_Comm_free(&dup);
  MPI_Comm_free_keyval(&key);
  MPI_Finalize();
  return 0;
}
