// attrcheck-test: np=1 modes=shadow,emulate
// divergence: win-constructors-dup-communicator
// clean
// exit: 0
/* The other half of win_constructor_copies: an attribute copied with MPI_COMM_DUP_FN and deleted
 * by the program's own delete callback. Open MPI and MPICH duplicate the communicator inside each
 * window constructor, attributes included, so the copy lands on a communicator of their own, and
 * the program's delete callback runs on it at MPI_Win_free: a communicator the program never
 * sees. Shadow mode notes that as the library's (library.divergence), not at the program's call,
 * and does not pass over it in silence; emulate mode holds the attribute itself, so no delete
 * callback runs at MPI_Win_free, as the standard says (checked below). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int deletes = 0, wrong = 0;
static MPI_Comm seen_on = MPI_COMM_NULL;

static int counting_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval; (void)extra;
  ++deletes;
  if (value != extra) ++wrong;
  seen_on = comm;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  static int tag = 7;
  int key;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, counting_delete, &key, &tag);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, &tag);
  char memory[64];
  void* base = NULL;
  MPI_Win win;
  MPI_Win_create(memory, sizeof memory, 1, MPI_INFO_NULL, MPI_COMM_SELF, &win);
  MPI_Win_free(&win);
  MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_SELF, &base, &win);
  MPI_Win_free(&win);
  MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, MPI_COMM_SELF, &base, &win);
  MPI_Win_free(&win);
  MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_SELF, &win);
  MPI_Win_free(&win);
  const int at_frees = deletes;
  const int other_comm = at_frees > 0 && seen_on != MPI_COMM_SELF;
  MPI_Comm_delete_attr(MPI_COMM_SELF, key);
  MPI_Comm_free_keyval(&key);
  printf("win_constructor_dup_fn: delete callbacks at 4 MPI_Win_free: %d (on another communicator: %d); then %d\n",
         at_frees, other_comm, deletes - at_frees);
  const char* mode = getenv("ATTRCHECK_MODE");
  MPI_Finalize();
  if (wrong || deletes - at_frees != 1) {
    fprintf(stderr, "win_constructor_dup_fn: a delete callback got a wrong value, or MPI_Comm_delete_attr ran none\n");
    return 1;
  }
  if (mode && !strcmp(mode, "emulate") && at_frees != 0) {
    fprintf(stderr, "win_constructor_dup_fn: emulate mode ran %d delete callbacks at MPI_Win_free\n", at_frees);
    return 1;
  }
  return 0;
}
