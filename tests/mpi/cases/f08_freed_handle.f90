! attrcheck-test: np=2 modes=shadow,emulate
! expect: object.invalid
! expect-at: object.invalid f08_freed_handle.f90:31
! expect-at: object.invalid f08_freed_handle.f90:36
! clean
! exit: 0
! Handles used after they were freed, both made by `use mpi_f08` constructors: an attribute set on
! a datatype made by MPI_Type_create_resized through a copy of its handle after MPI_Type_free,
! and on a communicator made by MPI_Comm_split after MPI_Comm_disconnect. The tool saw both made
! and freed, and nothing since returned the handles: object.invalid at each set, refused.
! (MPICH's Fortran handles are its C handles, so a freed one still names the freed object; Open
! MPI's MPI_Type_f2c / MPI_Comm_f2c make a freed Fortran handle a null pointer, which names no
! object at all.)
program f08_freed_handle
  use mpi_f08
  implicit none
  integer :: rank, tkey, ckey
  type(MPI_Datatype) :: t, saved_t
  type(MPI_Comm) :: c, saved_c

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN)
  call MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, tkey, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, ckey, 0_MPI_ADDRESS_KIND)

  call MPI_Type_create_resized(MPI_INTEGER, 0_MPI_ADDRESS_KIND, 8_MPI_ADDRESS_KIND, t)
  saved_t = t
  call MPI_Type_free(t)
  call MPI_Type_set_attr(saved_t, tkey, 1_MPI_ADDRESS_KIND)  ! BUG: the datatype was freed

  call MPI_Comm_split(MPI_COMM_WORLD, 0, rank, c)
  saved_c = c
  call MPI_Comm_disconnect(c)
  call MPI_Comm_set_attr(saved_c, ckey, 2_MPI_ADDRESS_KIND)  ! BUG: the communicator was disconnected

  call MPI_Type_free_keyval(tkey)
  call MPI_Comm_free_keyval(ckey)
  if (rank == 0) print '(a)', 'f08_freed_handle: done'
  call MPI_Finalize()
end program f08_freed_handle
