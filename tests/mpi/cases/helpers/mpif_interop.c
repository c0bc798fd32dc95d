/* C helpers of mpif_interop.f (fixed form, include 'mpif.h'): the C halves of the standard's
 * attribute interoperability examples (MPI-3.1 17.2.7), including the MPI-1 Fortran calls. Each
 * check returns 1 when what C saw is what the standard says it sees. */
#include <mpi.h>
#include <stddef.h>

static int set_val = 3;
static struct foo { double x; } set_struct;

/* Example 1 A: C sets a pointer to an int, a pointer to a struct, and an integer. */
void c_set_attrs_(MPI_Fint* fcomm, MPI_Fint* k1, MPI_Fint* k2, MPI_Fint* k3, MPI_Aint* addr_val,
                  MPI_Aint* addr_struct) {
  MPI_Comm comm = MPI_Comm_f2c(*fcomm);
  MPI_Comm_set_attr(comm, *k1, &set_val);
  MPI_Comm_set_attr(comm, *k2, &set_struct);
  MPI_Comm_set_attr(comm, *k3, (void*)17);
  *addr_val = (MPI_Aint)&set_val;
  *addr_struct = (MPI_Aint)&set_struct;
}

/* Example 2 B: MPI_ATTR_PUT set 7; C gets a pointer to an int holding 7. */
MPI_Fint c_get_mpi1_set_(MPI_Fint* fcomm, MPI_Fint* key) {
  int flag = 0, *value = NULL;
  MPI_Comm_get_attr(MPI_Comm_f2c(*fcomm), *key, &value, &flag);
  return flag && value && *value == 7;
}

/* Example 3 B: MPI_COMM_SET_ATTR set 42 and 2**40; C gets pointers to MPI_Aint. */
MPI_Fint c_get_mpi2_set_(MPI_Fint* fcomm, MPI_Fint* k1, MPI_Fint* k2) {
  MPI_Comm comm = MPI_Comm_f2c(*fcomm);
  int flag1 = 0, flag2 = 0;
  MPI_Aint *value1 = NULL, *value2 = NULL;
  MPI_Comm_get_attr(comm, *k1, &value1, &flag1);
  MPI_Comm_get_attr(comm, *k2, &value2, &flag2);
  return flag1 && flag2 && value1 && value2 && *value1 == 42 && *value2 == ((MPI_Aint)1 << 40);
}
