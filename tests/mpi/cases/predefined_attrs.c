// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* The predefined communicator attributes MPI_TAG_UB, MPI_HOST, MPI_IO and MPI_WTIME_IS_GLOBAL,
 * read on MPI_COMM_WORLD and on a duplicate of it, with their legal values checked. */
#include <mpi.h>
#include <stdio.h>

struct values {
  int tag_ub, host, io, wtime_global;
  int flags;
};

static struct values read_all(MPI_Comm comm) {
  struct values v = {0, 0, 0, 0, 0};
  int* p = NULL;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &p, &flag);
  if (flag) v.tag_ub = *p, v.flags |= 1;
  MPI_Comm_get_attr(comm, MPI_HOST, &p, &flag);
  if (flag) v.host = *p, v.flags |= 2;
  MPI_Comm_get_attr(comm, MPI_IO, &p, &flag);
  if (flag) v.io = *p, v.flags |= 4;
  MPI_Comm_get_attr(comm, MPI_WTIME_IS_GLOBAL, &p, &flag);
  if (flag) v.wtime_global = *p, v.flags |= 8;
  return v;
}

static void print_checks(const char* what, struct values v, int size) {
  printf("predefined_attrs: %s: TAG_UB set %d, >= 32767 %d\n", what, !!(v.flags & 1), v.tag_ub >= 32767);
  printf("predefined_attrs: %s: HOST set %d, valid (MPI_PROC_NULL or a rank) %d\n", what, !!(v.flags & 2),
         v.host == MPI_PROC_NULL || (v.host >= 0 && v.host < size));
  printf("predefined_attrs: %s: IO set %d, valid (MPI_PROC_NULL, MPI_ANY_SOURCE or a rank) %d\n", what,
         !!(v.flags & 4), v.io == MPI_PROC_NULL || v.io == MPI_ANY_SOURCE || (v.io >= 0 && v.io < size));
  printf("predefined_attrs: %s: WTIME_IS_GLOBAL set %d, 0 or 1 %d\n", what, !!(v.flags & 8),
         v.wtime_global == 0 || v.wtime_global == 1);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  const struct values world = read_all(MPI_COMM_WORLD);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const struct values copy = read_all(dup);
  const int same = world.flags == copy.flags && world.tag_ub == copy.tag_ub && world.host == copy.host &&
                   world.io == copy.io && world.wtime_global == copy.wtime_global;

  /* The largest tag works. */
  int sent = 42, received = 0;
  MPI_Sendrecv(&sent, 1, MPI_INT, rank, world.tag_ub, &received, 1, MPI_INT, rank, world.tag_ub, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Comm_free(&dup);

  if (rank == 0) {
    print_checks("MPI_COMM_WORLD", world, size);
    printf("predefined_attrs: the duplicate reads the same values %d\n", same);
    printf("predefined_attrs: a message with tag MPI_TAG_UB arrived %d\n", received == 42);
  }
  MPI_Finalize();
  return 0;
}
