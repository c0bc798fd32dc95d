// attrcheck-test: np=2 modes=shadow
// divergence: type-free-defers-delete-callbacks
// clean
// exit: 0
/* A correct program that Open MPI 4.1 runs differently from the standard, so shadow mode reports
 * impl.divergence: a datatype with attributes is freed while a datatype made from it (its
 * MPI_Type_dup, or a MPI_Type_contiguous of it) still exists. The standard runs the delete
 * callbacks at MPI_Type_free; Open MPI keeps the freed datatype alive (the new one references it)
 * and runs them only when the last datatype built from it is freed. */
#include <mpi.h>
#include <stdio.h>

static int deletes = 0;

static int type_delete(MPI_Datatype type, int keyval, void* value, void* extra) {
  (void)type; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &key, NULL);

  /* A duplicate outlives the original. */
  MPI_Datatype vec, copy;
  MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &vec);
  MPI_Type_set_attr(vec, key, (void*)1);
  MPI_Type_dup(vec, &copy);
  MPI_Type_free(&vec); /* the standard: the delete callback runs here */
  const int after_free_dup = deletes;
  MPI_Type_free(&copy); /* Open MPI runs it here */
  const int after_copy = deletes;

  /* A type built from it outlives it. */
  MPI_Datatype base, row;
  MPI_Type_contiguous(4, MPI_INT, &base);
  MPI_Type_set_attr(base, key, (void*)2);
  MPI_Type_contiguous(2, base, &row);
  MPI_Type_commit(&row);
  MPI_Type_free(&base); /* the standard: the delete callback runs here */
  const int after_free_base = deletes - after_copy;
  MPI_Type_free(&row);

  MPI_Type_free_keyval(&key);
  if (rank == 0)
    printf("datatype_dup_deferred_delete: at the original's free %d, at the duplicate's free %d; at the base's "
           "free %d, in all %d\n",
           after_free_dup, after_copy - after_free_dup, after_free_base, deletes);
  MPI_Finalize();
  return 0;
}
