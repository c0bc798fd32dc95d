// attrcheck-test: np=8 modes=shadow,emulate
// clean
// expect-processes: 8
// status: finalized
// expect-files: report.json
// expect-created: report.json
/* A clean run of eight ranks (attributes set, copied, deleted and freed correctly, an
 * MPI_COMM_SELF callback at MPI_Finalize) leaves exactly one file, the job's report, and creates
 * no other. */
#include <mpi.h>
#include <stddef.h>

static int on_self_delete(MPI_Comm comm, int key, void* value, void* extra) {
  (void)comm; (void)key; (void)value; (void)extra;
  int size;
  return MPI_Comm_size(MPI_COMM_WORLD, &size); /* MPI still works here */
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int key, self_key;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_self_delete, &self_key, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, self_key, NULL);
  MPI_Comm dup, copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_attr(dup, key, &key);
  MPI_Comm_dup(dup, &copy);
  MPI_Comm_free(&copy);
  MPI_Comm_delete_attr(dup, key);
  MPI_Comm_free(&dup);
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&self_key);
  MPI_Finalize();
  return 0;
}
