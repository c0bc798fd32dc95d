! attrcheck-test: np=2 modes=shadow,emulate
! expect: callback.error
! expect-at: callback.error f08_callback_error.f90:15-22
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! callback.error through `use mpi_f08`: a Fortran delete callback returns MPI_ERR_OTHER in ierror
! the first time it runs (MPI_Comm_delete_attr), so that call fails; the second delete works. The
! finding names the callback's Fortran source line. The communicator is a dup with
! MPI_ERRORS_RETURN, and the program does not depend on whether the failed delete kept the value.
module f08_callback_error_cbs
  use mpi_f08
  implicit none
  integer :: calls = 0
contains
  subroutine failing_delete(comm, comm_keyval, attribute_val, extra_state, ierror)
    type(MPI_Comm) :: comm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    calls = calls + 1
    ierror = MPI_SUCCESS
    if (calls == 1) ierror = MPI_ERR_OTHER  ! BUG the first time
  end subroutine failing_delete
end module f08_callback_error_cbs

program f08_callback_error
  use mpi_f08
  use f08_callback_error_cbs
  implicit none
  integer :: ierr, rank, key, first
  type(MPI_Comm) :: comm

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_dup(MPI_COMM_WORLD, comm)
  call MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, failing_delete, key, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(comm, key, 11_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_delete_attr(comm, key, first)
  call MPI_Comm_set_attr(comm, key, 12_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_delete_attr(comm, key, ierr)
  call MPI_Comm_free_keyval(key, ierr)
  call MPI_Comm_free(comm, ierr)
  if (rank == 0) print '(a,l2,a,l2)', 'f08_callback_error: first delete failed', first /= MPI_SUCCESS, &
                                     ', second worked', ierr == MPI_SUCCESS
  call MPI_Finalize()
end program f08_callback_error
