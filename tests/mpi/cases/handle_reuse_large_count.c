// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// native-skip: 77
/* Datatypes and windows made by the MPI-4.0 large-count constructors (MPI_Type_contiguous_c and
 * every other _c one), each right after the program freed an object of the same kind, so that the
 * library hands the freed handle out again: each is used (an attribute set and read) and freed,
 * as natively, with no finding. A library whose mpi.h is of MPI 3.1 (Open MPI 4.1 and 5.0) has no
 * large-count functions: the program says so and exits 77, skipped. */
#include <mpi.h>
#include <stdio.h>

enum { kNotHere = 77 };

static int failed, reused, key;

/* Frees a datatype made by MPI_Type_contiguous, then checks the one `make` returns. */
#define CHECK_TYPE(make)                                                           \
  do {                                                                             \
    MPI_Datatype old_, t_;                                                         \
    MPI_Type_contiguous(2, MPI_INT, &old_);                                        \
    const MPI_Datatype freed_ = old_;                                              \
    MPI_Type_free(&old_);                                                          \
    if ((make) != MPI_SUCCESS) { ++failed; break; }                                \
    reused += t_ == freed_;                                                        \
    void* v_ = NULL;                                                               \
    int flag_ = 0;                                                                 \
    if (MPI_Type_set_attr(t_, key, (void*)7) != MPI_SUCCESS) ++failed;             \
    if (MPI_Type_get_attr(t_, key, &v_, &flag_) != MPI_SUCCESS || !flag_ || v_ != (void*)7) ++failed; \
    if (MPI_Type_commit(&t_) != MPI_SUCCESS) ++failed;                             \
    if (MPI_Type_free(&t_) != MPI_SUCCESS) ++failed;                               \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int checks = 0;
#if MPI_VERSION >= 4
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &key, NULL);
  const MPI_Count lengths[2] = {1, 2}, displs[2] = {0, 4}, sizes[1] = {8}, subsizes[1] = {4}, starts[1] = {2};
  const MPI_Count gsizes[1] = {8};
  const int distribs[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG}, psizes[1] = {1};
  const MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
  CHECK_TYPE(MPI_Type_contiguous_c(4, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_vector_c(2, 1, 2, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_create_hvector_c(2, 1, 16, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_indexed_c(2, lengths, displs, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_create_hindexed_c(2, lengths, displs, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_create_indexed_block_c(2, 1, displs, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_create_hindexed_block_c(2, 1, displs, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_create_struct_c(2, lengths, displs, types, &t_));
  CHECK_TYPE(MPI_Type_create_subarray_c(1, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_create_darray_c(1, 0, 1, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t_));
  CHECK_TYPE(MPI_Type_create_resized_c(MPI_INT, 0, 16, &t_));
  checks = 11;
  MPI_Type_free_keyval(&key);

  /* Windows: MPI_Win_create_c, MPI_Win_allocate_c, MPI_Win_allocate_shared_c. */
  static int buf[16];
  for (int i = 0; i < 3; ++i) {
    MPI_Win old, w;
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &old);
    const MPI_Win freed = old;
    MPI_Win_free(&old);
    void* base = NULL;
    int rc = i == 0 ? MPI_Win_create_c(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w)
           : i == 1 ? MPI_Win_allocate_c(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w)
                    : MPI_Win_allocate_shared_c(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w);
    if (rc != MPI_SUCCESS) { ++failed; continue; }
    reused += w == freed;
    if (MPI_Win_free(&w) != MPI_SUCCESS) ++failed;
    ++checks;
  }
#else
  fprintf(stderr, "handle_reuse_large_count: MPI %d.%d has no large-count (_c) functions\n", MPI_VERSION, MPI_SUBVERSION);
  MPI_Finalize();
  return kNotHere;
#endif
  /* How many handles come back depends on the library's allocator, and attrcheck's own
   * allocations shift it: the count goes to stderr, only whether any came back to stdout. */
  fprintf(stderr, "handle_reuse_large_count: %d handles reused\n", reused);
  printf("handle_reuse_large_count: %d constructors, %d failed, handles reused: %s\n", checks, failed,
         reused ? "yes" : "no");
  MPI_Finalize();
  return 0;
}
