! attrcheck-test: np=2 modes=shadow,emulate
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! native: same-stdout
! MPI_FINALIZE deletes MPI_COMM_SELF's attributes newest first: here a C attribute set first, then
! two Fortran ones (`use mpi`), so the delete callbacks must run for 3, 2, 1. Where the library
! passes Fortran delete callbacks a wrong handle (Open MPI 4.1.4), shadow mode models what the
! library did: the runs whose handle is wrong still count for MPI_COMM_SELF in the order check,
! which must not call the correct order out of order.
subroutine f_delete(comm, keyval, attribute_val, extra_state, ierror)
  use mpi
  implicit none
  integer :: comm, keyval, ierror, rank, ierr
  integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  if (rank == 0) then
    write (*, '(A,I0,A)') 'self_delete_order_mixed: delete ', attribute_val, ' (Fortran)'
    flush (6)
  end if
  ierror = MPI_SUCCESS
end subroutine

program self_delete_order_mixed
  use mpi
  implicit none
  external :: f_delete
  integer :: ierr, key1, key2
  integer(kind=MPI_ADDRESS_KIND) :: extra
  call MPI_INIT(ierr)
  extra = 0
  call c_set_on_self(1)
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, f_delete, key1, extra, ierr)
  call MPI_COMM_SET_ATTR(MPI_COMM_SELF, key1, 2_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, f_delete, key2, extra, ierr)
  call MPI_COMM_SET_ATTR(MPI_COMM_SELF, key2, 3_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_FREE_KEYVAL(key1, ierr)
  call MPI_COMM_FREE_KEYVAL(key2, ierr)
  call MPI_FINALIZE(ierr)
end program
