// attrcheck-test: np=1 modes=shadow,emulate
// divergence: win-constructors-dup-communicator
// clean
// exit: 0
/* A correct program the libraries run differently from the standard: no window constructor may
 * copy communicator attributes (only the MPI_COMM_DUP family does), but Open MPI and MPICH
 * duplicate the communicator inside MPI_Win_create, MPI_Win_allocate, MPI_Win_allocate_shared and
 * MPI_Win_create_dynamic, attributes included, so the program's copy callback runs inside each.
 * Here it declines (flag 0): nothing is copied, and the program is right either way. Shadow mode
 * notes it once as the library's (library.divergence), never at the program's call; emulate mode
 * serves the attribute itself, so the library has nothing to copy and the callback never runs,
 * as the standard says (checked below). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int copies = 0;

static int declining_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra; (void)in; (void)out;
  ++copies;
  *flag = 0;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int key;
  MPI_Comm_create_keyval(declining_copy, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)&key);
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
  MPI_Comm_delete_attr(MPI_COMM_SELF, key);
  MPI_Comm_free_keyval(&key);
  const char* mode = getenv("ATTRCHECK_MODE");
  printf("win_constructor_copies: copy callbacks run by 4 window constructors: %d\n", copies);
  MPI_Finalize();
  if (mode && !strcmp(mode, "emulate") && copies != 0) {
    fprintf(stderr, "win_constructor_copies: emulate mode ran %d copy callbacks in window constructors\n", copies);
    return 1;
  }
  return 0;
}
