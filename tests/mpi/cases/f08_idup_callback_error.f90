! attrcheck-test: np=2 modes=shadow,emulate
! expect: callback.error
! expect-at: callback.error f08_idup_callback_error.f90:17-27
! clean
! exit: 0
! callback.error through a Fortran MPI_Comm_idup: the copy callback of an attribute on a
! communicator made by MPI_Comm_split returns MPI_ERR_OTHER in ierror, so the idup fails (the
! standard: a copy callback's error makes the duplication fail). The finding names the callback's
! Fortran source line, in emulate mode (where the tool runs the callback for the idup it serves)
! as in shadow mode. The communicator has MPI_ERRORS_RETURN; the program does not depend on what
! the failed idup left behind.
module f08_idup_callback_error_cbs
  use mpi_f08
  implicit none
  integer :: calls = 0
contains
  subroutine failing_copy(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, &
                          flag, ierror)
    type(MPI_Comm) :: oldcomm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    calls = calls + 1
    attribute_val_out = attribute_val_in
    flag = .false.
    ierror = MPI_ERR_OTHER  ! BUG: the copy fails
  end subroutine failing_copy
end module f08_idup_callback_error_cbs

program f08_idup_callback_error
  use mpi_f08
  use f08_idup_callback_error_cbs
  implicit none
  integer :: rank, key, ierr
  type(MPI_Comm) :: split, copy
  type(MPI_Request) :: req

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_split(MPI_COMM_WORLD, 0, rank, split)
  call MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN)
  call MPI_Comm_create_keyval(failing_copy, MPI_COMM_NULL_DELETE_FN, key, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_set_attr(split, key, 5_MPI_ADDRESS_KIND)
  call MPI_Comm_idup(split, copy, req, ierr)
  if (ierr == MPI_SUCCESS) call MPI_Wait(req, MPI_STATUS_IGNORE)
  if (rank == 0) print '(a,l2,a,i0)', 'f08_idup_callback_error: idup failed', ierr /= MPI_SUCCESS, &
                                      ', copy callback runs ', calls
  call MPI_Comm_delete_attr(split, key)
  call MPI_Comm_free_keyval(key)
  call MPI_Comm_free(split)
  call MPI_Finalize()
end program f08_idup_callback_error
