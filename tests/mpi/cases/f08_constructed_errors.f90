! attrcheck-test: np=2 modes=shadow,emulate
! expect: keyval.kind-mismatch attr.leak keyval.leak
! expect-at: keyval.kind-mismatch f08_constructed_errors.f90:28
! expect-at: attr.leak f08_constructed_errors.f90:31
! clean
! exit: 0
! Seeded bugs on handles made by `use mpi_f08` constructors: a communicator keyval used to set an
! attribute on a datatype made by MPI_Type_vector (keyval.kind-mismatch at the set), and an
! attribute with a delete callback left on a communicator made by MPI_Comm_split that is never
! freed (attr.leak, whose "object created" provenance names the MPI_Comm_split line: the tool saw
! the communicator made), under a keyval never freed (keyval.leak). The erroneous set leaves
! ierror out (gfortran's line table: docs/fortran.md); MPI_ERRORS_RETURN so that it returns.
program f08_constructed_errors
  use mpi_f08
  implicit none
  integer :: rank, ckey
  type(MPI_Comm) :: kept
  type(MPI_Datatype) :: vec

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, ckey, 0_MPI_ADDRESS_KIND)

  call MPI_Type_vector(2, 1, 2, MPI_INTEGER, vec)
  call MPI_Type_commit(vec)
  call MPI_Type_set_attr(vec, ckey, 1_MPI_ADDRESS_KIND)  ! BUG: a communicator keyval on a datatype
  call MPI_Type_free(vec)

  call MPI_Comm_split(MPI_COMM_WORLD, 0, rank, kept)
  call MPI_Comm_set_attr(kept, ckey, 9_MPI_ADDRESS_KIND)  ! BUG: kept is never freed, ckey neither

  if (rank == 0) print '(a)', 'f08_constructed_errors: done'
  call MPI_Finalize()

contains

  subroutine count_delete(comm, comm_keyval, attribute_val, extra_state, ierror)
    type(MPI_Comm) :: comm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    ierror = MPI_SUCCESS
  end subroutine count_delete

end program f08_constructed_errors
