/* C helpers of f08_interop.f90 (a `use mpi_f08` main): the C halves of the standard's
 * attribute interoperability examples (MPI-3.1 17.2.7). Each returns 1 when what C saw is what
 * the standard says it sees. Communicators arrive as Fortran handles (MPI_Fint). */
#include <mpi.h>
#include <stddef.h>

static int set_val = 3;
static struct foo { double x; } set_struct;

/* Example 1 A: C sets a pointer to an int, a pointer to a struct, and an integer. */
void c_set_attrs(MPI_Fint* fcomm, MPI_Fint* k1, MPI_Fint* k2, MPI_Fint* k3, MPI_Aint* addr_val,
                 MPI_Aint* addr_struct) {
  MPI_Comm comm = MPI_Comm_f2c(*fcomm);
  MPI_Comm_set_attr(comm, *k1, &set_val);
  MPI_Comm_set_attr(comm, *k2, &set_struct);
  MPI_Comm_set_attr(comm, *k3, (void*)17);
  *addr_val = (MPI_Aint)&set_val;
  *addr_struct = (MPI_Aint)&set_struct;
}

/* Example 1 B: C reads them back. */
int c_get_own(MPI_Fint* fcomm, MPI_Fint* k1, MPI_Fint* k2, MPI_Fint* k3) {
  MPI_Comm comm = MPI_Comm_f2c(*fcomm);
  int flag1 = 0, flag2 = 0, flag3 = 0, *get_val = NULL, *get_17 = NULL;
  struct foo* get_struct = NULL;
  MPI_Comm_get_attr(comm, *k1, &get_val, &flag1);
  MPI_Comm_get_attr(comm, *k2, &get_struct, &flag2);
  MPI_Comm_get_attr(comm, *k3, &get_17, &flag3);
  return flag1 && flag2 && flag3 && get_val == &set_val && *get_val == 3 && get_struct == &set_struct &&
         (MPI_Aint)get_17 == 17;
}

/* Example 3 B: Fortran set 42 and 2**40 with MPI_COMM_SET_ATTR; C gets pointers to MPI_Aint. */
int c_get_fortran_set(MPI_Fint* fcomm, MPI_Fint* k1, MPI_Fint* k2) {
  MPI_Comm comm = MPI_Comm_f2c(*fcomm);
  int flag1 = 0, flag2 = 0;
  MPI_Aint *value1 = NULL, *value2 = NULL;
  MPI_Comm_get_attr(comm, *k1, &value1, &flag1);
  MPI_Comm_get_attr(comm, *k2, &value2, &flag2);
  return flag1 && flag2 && value1 && value2 && *value1 == 42 && *value2 == ((MPI_Aint)1 << 40);
}

/* A C keyval whose C copy callback meets a Fortran-set value: it gets a pointer to the stored
 * MPI_Aint, and copies the value + 1 (an integer attribute, as C sets one). */
static int copies_of_42 = 0;
static int plus_one_copy(MPI_Comm comm, int key, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)key; (void)extra;
  const MPI_Aint v = *(const MPI_Aint*)in;
  copies_of_42 += v == 42;
  *(void**)out = (void*)(v + 1);
  *flag = 1;
  return MPI_SUCCESS;
}
void c_make_copying_key(MPI_Fint* key) {
  int k;
  MPI_Comm_create_keyval(plus_one_copy, MPI_COMM_NULL_DELETE_FN, &k, NULL);
  *key = k;
}
int c_copies_of_42(void) { return copies_of_42; }

/* A C delete of a Fortran-set attribute, and a C free of a Fortran-created keyval. */
void c_delete_and_free(MPI_Fint* fcomm, MPI_Fint* key) {
  MPI_Comm_delete_attr(MPI_Comm_f2c(*fcomm), *key);
  int k = *key;
  MPI_Comm_free_keyval(&k);
  *key = k;
}
