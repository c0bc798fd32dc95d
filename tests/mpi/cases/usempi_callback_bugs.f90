! attrcheck-test: np=2 modes=shadow,emulate
! expect: callback.error callback.bad-flag callback.reentrant
! expect-at: callback.error usempi_callback_bugs.f90:38-44
! expect-at: callback.bad-flag usempi_callback_bugs.f90:28-36
! expect-at: callback.reentrant usempi_callback_bugs.f90:46-54
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! Fortran (`use mpi`) callbacks with one seeded bug each, each reported at its Fortran source in
! both modes: a copy callback that leaves 7 in its LOGICAL flag (callback.bad-flag), a delete
! callback that returns MPI_ERR_OTHER the first time it runs (callback.error: that
! MPI_COMM_DELETE_ATTR fails), and a copy callback that sets an attribute on the communicator being copied
! (callback.reentrant: refused, MPI_COMM_WORLD returns errors). The program does not depend on
! what the library makes of the garbage flag or the failed delete.
module usempi_callback_bugs_cbs
  use mpi
  implicit none
  integer :: calls = 0, deletes = 0, refused = 0, other_key
contains
  subroutine store_seven(l)
    use, intrinsic :: iso_c_binding, only: c_f_pointer, c_loc
    logical, target :: l
    integer, pointer :: raw
    call c_f_pointer(c_loc(l), raw)
    raw = 7
  end subroutine store_seven

  subroutine garbage_copy(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror)
    integer :: oldcomm, comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    calls = calls + 1
    attribute_val_out = attribute_val_in
    call store_seven(flag)  ! BUG: neither .TRUE. nor .FALSE.
    ierror = MPI_SUCCESS
  end subroutine garbage_copy

  subroutine failing_delete(comm, comm_keyval, attribute_val, extra_state, ierror)
    integer :: comm, comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    deletes = deletes + 1
    ierror = MPI_SUCCESS
    if (deletes == 1) ierror = MPI_ERR_OTHER  ! BUG the first time
  end subroutine failing_delete

  subroutine reentrant_copy(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror)
    integer :: oldcomm, comm_keyval, ierror, rc
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    call MPI_COMM_SET_ATTR(oldcomm, other_key, 1_MPI_ADDRESS_KIND, rc)  ! BUG: the object being copied
    if (rc /= MPI_SUCCESS) refused = refused + 1
    flag = .false.
    ierror = MPI_SUCCESS
  end subroutine reentrant_copy
end module usempi_callback_bugs_cbs

program usempi_callback_bugs
  use mpi
  use usempi_callback_bugs_cbs
  implicit none
  integer :: ierr, rank, kflag, kdel, kre, comm, dup, first

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_COMM_CREATE_KEYVAL(garbage_copy, MPI_COMM_NULL_DELETE_FN, kflag, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, failing_delete, kdel, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_CREATE_KEYVAL(reentrant_copy, MPI_COMM_NULL_DELETE_FN, kre, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, other_key, 0_MPI_ADDRESS_KIND, ierr)

  call MPI_COMM_DUP(MPI_COMM_WORLD, comm, ierr)
  call MPI_COMM_SET_ERRHANDLER(comm, MPI_ERRORS_RETURN, ierr)
  call MPI_COMM_SET_ATTR(comm, kflag, 5_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_SET_ATTR(comm, kre, 6_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_DUP(comm, dup, ierr)
  call MPI_COMM_FREE(dup, ierr)
  call MPI_COMM_DELETE_ATTR(comm, kflag, ierr)
  call MPI_COMM_DELETE_ATTR(comm, kre, ierr)

  call MPI_COMM_SET_ATTR(comm, kdel, 1_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_DELETE_ATTR(comm, kdel, first)
  call MPI_COMM_SET_ATTR(comm, kdel, 2_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_DELETE_ATTR(comm, kdel, ierr)
  call MPI_COMM_FREE(comm, ierr)
  call MPI_COMM_FREE_KEYVAL(kflag, ierr)
  call MPI_COMM_FREE_KEYVAL(kdel, ierr)
  call MPI_COMM_FREE_KEYVAL(kre, ierr)
  call MPI_COMM_FREE_KEYVAL(other_key, ierr)
  if (rank == 0) print '(a,l2,a,i0)', 'usempi_callback_bugs: failing delete failed', first /= MPI_SUCCESS, &
    ', reentrant sets refused ', refused
  call MPI_FINALIZE(ierr)
end program usempi_callback_bugs
