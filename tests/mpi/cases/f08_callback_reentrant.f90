! attrcheck-test: np=2 modes=shadow,emulate
! expect: callback.reentrant
! expect-at: callback.reentrant f08_callback_reentrant.f90:16-29
! clean
! exit: 0
! callback.reentrant through `use mpi_f08`: a Fortran copy callback, running during MPI_Comm_dup,
! sets another attribute on the communicator it was called for (the one being copied). The call
! is refused (MPI_COMM_WORLD returns errors); the dup itself works. A set on another communicator
! from the same callback is fine.
module f08_callback_reentrant_cbs
  use mpi_f08
  implicit none
  integer :: other_key, refused = 0, ran = 0
  type(MPI_Comm) :: elsewhere
contains
  subroutine reentrant_copy(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror)
    type(MPI_Comm) :: oldcomm
    integer :: comm_keyval, ierror, rc
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    ran = ran + 1
    call MPI_Comm_set_attr(elsewhere, other_key, 2_MPI_ADDRESS_KIND, rc)  ! fine: another communicator
    if (rc /= MPI_SUCCESS) refused = refused + 100
    call MPI_Comm_set_attr(oldcomm, other_key, 1_MPI_ADDRESS_KIND, rc)  ! BUG: the object being copied
    if (rc /= MPI_SUCCESS) refused = refused + 1
    attribute_val_out = attribute_val_in
    flag = .true.
    ierror = MPI_SUCCESS
  end subroutine reentrant_copy
end module f08_callback_reentrant_cbs

program f08_callback_reentrant
  use mpi_f08
  use f08_callback_reentrant_cbs
  implicit none
  integer :: rank, key
  type(MPI_Comm) :: comm

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Comm_dup(MPI_COMM_SELF, elsewhere)
  call MPI_Comm_create_keyval(reentrant_copy, MPI_COMM_NULL_DELETE_FN, key, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, other_key, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, key, 3_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(MPI_COMM_WORLD, comm)
  call MPI_Comm_free(comm)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, key)
  call MPI_Comm_delete_attr(elsewhere, other_key)
  call MPI_Comm_free(elsewhere)
  call MPI_Comm_free_keyval(key)
  call MPI_Comm_free_keyval(other_key)
  if (rank == 0) print '(a,i0,a,i0)', 'f08_callback_reentrant: callback ran ', ran, ', refused ', refused
  call MPI_Finalize()
end program f08_callback_reentrant
