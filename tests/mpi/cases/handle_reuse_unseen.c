// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* Objects made on a path attrcheck does not see: the program calls the library's PMPI_ entry
 * points itself (which no interposition library can intercept), right after freeing an object of
 * the same kind through MPI_, so that the library hands the freed handle out again. The tool saw
 * that handle freed and no call it intercepts returned it since; the library has a live object
 * with it, so the program's calls on it are correct: an attribute set, read and deleted, a dup,
 * the free. None may be refused (object.invalid), as none fails natively. (Communicators here,
 * windows in handle_reuse_unseen_win.c: neither library can be asked safely about a datatype
 * handle, so a freed datatype handle no intercepted call returned is still refused:
 * docs/rules.md, object.invalid.) */
#include <mpi.h>
#include <stdio.h>

static int failed, reused;

#define USE(Kind, obj, key)                                                                   \
  do {                                                                                        \
    void* v_ = NULL;                                                                          \
    int flag_ = 0;                                                                            \
    if (MPI_##Kind##_set_attr(obj, key, (void*)9) != MPI_SUCCESS) ++failed;                   \
    if (MPI_##Kind##_get_attr(obj, key, &v_, &flag_) != MPI_SUCCESS || !flag_ || v_ != (void*)9) ++failed; \
    if (MPI_##Kind##_delete_attr(obj, key) != MPI_SUCCESS) ++failed;                          \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int ckey;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &ckey, NULL);
  for (int i = 0; i < 3; ++i) {
    MPI_Comm a, b, c;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    const MPI_Comm freed = a;
    MPI_Comm_free(&a);
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &b) != MPI_SUCCESS) ++failed;
    reused += b == freed;
    USE(Comm, b, ckey);
    if (MPI_Comm_dup(b, &c) != MPI_SUCCESS) ++failed;
    else if (MPI_Comm_free(&c) != MPI_SUCCESS) ++failed;
    if (MPI_Comm_free(&b) != MPI_SUCCESS) ++failed;
  }
  MPI_Comm_free_keyval(&ckey);
  printf("handle_reuse_unseen: %d failed, handles reused: %s\n", failed, reused ? "yes" : "no");
  MPI_Finalize();
  return 0;
}
