! attrcheck-test: np=2 modes=shadow,emulate
! expect: callback.bad-flag
! expect-at: callback.bad-flag f08_callback_bad_flag.f90:15-24
! clean
! exit: 0
! callback.bad-flag through `use mpi_f08`: a Fortran copy callback leaves in its LOGICAL flag a
! value that is neither .TRUE. nor .FALSE. (7, stored through an INTEGER pointer). Whether the attribute is then
! copied is undefined, so the program does not depend on it (no user delete callback, no read of
! the copy). The finding names the callback's Fortran source line.
module f08_callback_bad_flag_cbs
  use mpi_f08
  implicit none
  integer :: copies = 0
contains
  subroutine garbage_copy(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror)
    type(MPI_Comm) :: oldcomm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    copies = copies + 1
    attribute_val_out = attribute_val_in
    call store_seven(flag)  ! BUG: 7 in a LOGICAL, neither .TRUE. nor .FALSE.
    ierror = MPI_SUCCESS
  end subroutine garbage_copy

  subroutine store_seven(l)
    use, intrinsic :: iso_c_binding, only: c_f_pointer, c_loc
    logical, target :: l
    integer, pointer :: raw
    call c_f_pointer(c_loc(l), raw)
    raw = 7
  end subroutine store_seven
end module f08_callback_bad_flag_cbs

program f08_callback_bad_flag
  use mpi_f08
  use f08_callback_bad_flag_cbs
  implicit none
  integer :: rank, key
  type(MPI_Comm) :: comm

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_create_keyval(garbage_copy, MPI_COMM_NULL_DELETE_FN, key, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, key, 3_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(MPI_COMM_WORLD, comm)
  call MPI_Comm_free(comm)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, key)
  call MPI_Comm_free_keyval(key)
  if (rank == 0) print '(a,i0)', 'f08_callback_bad_flag: copy callback calls ', copies
  call MPI_Finalize()
end program f08_callback_bad_flag
