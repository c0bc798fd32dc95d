// attrcheck-test: np=1 modes=shadow
// expect: keyval.invalid keyval.unknown keyval.kind-mismatch keyval.predefined attr.delete-absent keyval.double-free
// native: error-classes
/* The error classes the MPI library itself returns for erroneous attribute calls, printed as
 * "error-class SITUATION CLASS": the native run must print exactly what the library's profile
 * (src/runtime/mpi_profile.def, ERROR_CLASS) says, so the profile stays true to the library it
 * describes. Under attrcheck the calls are refused and reported instead. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void show(const char* situation, int rc) {
  int cls = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  const char* name = cls == MPI_SUCCESS ? "MPI_SUCCESS" : cls == MPI_ERR_KEYVAL ? "MPI_ERR_KEYVAL"
                   : cls == MPI_ERR_OTHER ? "MPI_ERR_OTHER" : cls == MPI_ERR_ARG ? "MPI_ERR_ARG" : "another";
  printf("error-class %s %s\n", situation, name);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  void* v = NULL;
  int flag = 0;
  int key, type_key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &type_key, NULL);

  show("get-keyval-invalid", MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, &v, &flag));
  show("set-unknown-keyval", MPI_Comm_set_attr(MPI_COMM_WORLD, 12345, v));
  show("get-other-kind-keyval", MPI_Comm_get_attr(MPI_COMM_WORLD, type_key, &v, &flag));
  show("set-other-kind-keyval", MPI_Comm_set_attr(MPI_COMM_WORLD, type_key, v));
  show("set-predefined-keyval", MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, v));
  show("delete-absent-attribute", MPI_Comm_delete_attr(MPI_COMM_WORLD, key));
  int saved = key;
  MPI_Comm_free_keyval(&key);
  show("free-keyval-twice", MPI_Comm_free_keyval(&saved));
  int null_key = MPI_KEYVAL_INVALID;
  show("create-keyval-null-callbacks", MPI_Comm_create_keyval(NULL, NULL, &null_key, NULL));
  if (null_key != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&null_key);
  MPI_Type_free_keyval(&type_key);
  MPI_Finalize();
  return 0;
}
