// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI's own internals cache attributes on user communicators through internal calls the tool
 * never sees (ROMIO's MPI_File_open does on Open MPI). The user's attributes on the same
 * communicators must keep working: set before and after the file is opened, dup'd, deleted, freed.
 * (ROMIO also duplicates the communicator internally, which runs the user's copy callback once
 * more natively and in shadow mode, but not in emulate mode: the counts are not printed.) */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

  char path[256] = "";
  if (rank == 0) snprintf(path, sizeof path, "/tmp/attrcheck-internal-%ld.dat", (long)getpid());
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

  int key;
  MPI_Comm_create_keyval(counting_copy, counting_delete, &key, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, key, (void*)1);

  MPI_File fh;
  MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
  int value = 100 + rank, back = 0;
  MPI_File_write_at_all(fh, rank * (MPI_Offset)sizeof(int), &value, 1, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_read_at_all(fh, rank * (MPI_Offset)sizeof(int), &back, 1, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);

  void* got = NULL;
  int flag = 0;
  MPI_Comm_get_attr(comm, key, &got, &flag);
  const int kept = flag && got == (void*)1;
  MPI_Comm copy;
  MPI_Comm_dup(comm, &copy); /* internal attributes, if any, are copied by the library */
  MPI_Comm_get_attr(copy, key, &got, &flag);
  const int copied = flag && got == (void*)1;
  MPI_Comm_set_attr(copy, key, (void*)2);
  MPI_Comm_delete_attr(copy, key);
  MPI_Comm_free(&copy);
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) MPI_File_delete(path, MPI_INFO_NULL);

  if (rank == 0)
    printf("internal_attributes: file round trip %d, attribute kept %d, copied %d, at least the user's copy and "
           "delete callbacks ran %d\n",
           back == value, kept, copied, copies >= 1 && deletes >= 3);
  MPI_Finalize();
  return 0;
}
