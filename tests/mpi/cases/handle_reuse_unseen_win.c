// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// skip-on mpich-standard-abi: MPICH's libmpi_abi cannot be asked whether a window is live (every call succeeds on a freed window there: MPI_Win_get_name, _get_group, _get_attr), so, as with datatypes, a freed window handle no intercepted call returned is refused (docs/rules.md, object.invalid)
/* handle_reuse_unseen.c's windows: the program frees a window through MPI_ and makes the next one
 * through the library's PMPI_Win_create itself (which no interposition library can intercept),
 * so that the library hands the freed handle out again. The tool saw that handle freed and no
 * call it intercepts returned it since; the library has a live window with it, so the program's
 * calls on it are correct: an attribute set, read and deleted, the free. None may be refused
 * (object.invalid), as none fails natively. */
#include <mpi.h>
#include <stdio.h>

static int failed, reused;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int wkey;
  MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &wkey, NULL);
  static int buf[16];
  for (int i = 0; i < 3; ++i) {
    MPI_Win v, w;
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &v);
    const MPI_Win freed = v;
    MPI_Win_free(&v);
    if (PMPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w) != MPI_SUCCESS) ++failed;
    reused += w == freed;
    void* got = NULL;
    int flag = 0;
    if (MPI_Win_set_attr(w, wkey, (void*)9) != MPI_SUCCESS) ++failed;
    if (MPI_Win_get_attr(w, wkey, &got, &flag) != MPI_SUCCESS || !flag || got != (void*)9) ++failed;
    if (MPI_Win_delete_attr(w, wkey) != MPI_SUCCESS) ++failed;
    if (MPI_Win_free(&w) != MPI_SUCCESS) ++failed;
  }
  MPI_Win_free_keyval(&wkey);
  printf("handle_reuse_unseen_win: %d failed, handles reused: %s\n", failed, reused ? "yes" : "no");
  MPI_Finalize();
  return 0;
}
