! attrcheck-test: np=2 modes=shadow,emulate
! divergence: fortran-delete-callback-wrong-handle
! clean
! expect-intercepted: keyval.f08>=1 attribute.f08>=1 object.f08>=1 callback.fortran>=1 keyval.c=0 attribute.c=0 attribute.fortran=0
! exit: 0
! native: same-stdout
! A correct `use mpi_f08` program: nothing may be reported but the library's known divergence.
! MPI_COMM_DUP_FN copies an address-sized value (2**40 + 3) exactly; a Fortran copy callback adds
! one and its delete callback sees the values; datatype attributes on a duplicate of MPI_INTEGER
! and on a derived type (MPI_Type_contiguous) with MPI_TYPE_DUP_FN and a Fortran delete callback;
! a window attribute with a Fortran delete callback run by MPI_Win_free; MPI_WIN_SIZE read back.
module f08_correct_cbs
  use mpi_f08
  implicit none
  integer :: copies = 0, deletes = 0
  integer(kind=MPI_ADDRESS_KIND) :: deleted_sum = 0
contains
  subroutine plus_one(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror)
    type(MPI_Comm) :: oldcomm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    copies = copies + 1
    attribute_val_out = attribute_val_in + extra_state
    flag = .true.
    ierror = MPI_SUCCESS
  end subroutine plus_one

  subroutine count_comm(comm, comm_keyval, attribute_val, extra_state, ierror)
    type(MPI_Comm) :: comm  ! not looked at: Open MPI 4.1.4 passes a wrong handle
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    deletes = deletes + 1
    deleted_sum = deleted_sum + attribute_val
    ierror = MPI_SUCCESS
  end subroutine count_comm

  subroutine count_type(datatype, type_keyval, attribute_val, extra_state, ierror)
    type(MPI_Datatype) :: datatype
    integer :: type_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    deletes = deletes + 1
    deleted_sum = deleted_sum + attribute_val
    ierror = MPI_SUCCESS
  end subroutine count_type

  subroutine count_win(win, win_keyval, attribute_val, extra_state, ierror)
    type(MPI_Win) :: win
    integer :: win_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    deletes = deletes + 1
    deleted_sum = deleted_sum + attribute_val
    ierror = MPI_SUCCESS
  end subroutine count_win
end module f08_correct_cbs

program f08_correct
  use mpi_f08
  use f08_correct_cbs
  implicit none
  integer :: rank, dupkey, pluskey, tkey, wkey, buf(4)
  integer(kind=MPI_ADDRESS_KIND) :: big, v, size
  logical :: flag
  type(MPI_Comm) :: c1, c2
  type(MPI_Datatype) :: tint, tvec, tdup
  type(MPI_Win) :: win

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  big = int(2, kind=MPI_ADDRESS_KIND)**40 + 3

  ! Communicators: MPI_COMM_DUP_FN and a Fortran copy callback.
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, dupkey, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_create_keyval(plus_one, count_comm, pluskey, 1_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(MPI_COMM_WORLD, c1)
  call MPI_Comm_set_attr(c1, dupkey, big)
  call MPI_Comm_set_attr(c1, pluskey, 10_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(c1, c2)
  call MPI_Comm_get_attr(c2, dupkey, v, flag)
  if (rank == 0) print '(a,l2)', 'f08_correct: MPI_COMM_DUP_FN copied 2**40+3', flag .and. v == big
  call MPI_Comm_get_attr(c2, pluskey, v, flag)
  if (rank == 0) print '(a,l2)', 'f08_correct: copy callback gave 11', flag .and. v == 11
  call MPI_Comm_free(c2)
  call MPI_Comm_free(c1)

  ! Datatypes: a duplicate of MPI_INTEGER and a derived type.
  call MPI_Type_create_keyval(MPI_TYPE_DUP_FN, count_type, tkey, 0_MPI_ADDRESS_KIND)
  call MPI_Type_dup(MPI_INTEGER, tint)
  call MPI_Type_contiguous(4, MPI_INTEGER, tvec)
  call MPI_Type_commit(tvec)
  call MPI_Type_set_attr(tint, tkey, 100_MPI_ADDRESS_KIND)
  call MPI_Type_set_attr(tvec, tkey, big)
  call MPI_Type_dup(tvec, tdup)
  call MPI_Type_get_attr(tdup, tkey, v, flag)
  if (rank == 0) print '(a,l2)', 'f08_correct: derived type attribute copied', flag .and. v == big
  call MPI_Type_get_attr(tint, tkey, v, flag)
  if (rank == 0) print '(a,l2)', 'f08_correct: MPI_INTEGER dup attribute', flag .and. v == 100
  call MPI_Type_free(tdup)
  call MPI_Type_free(tvec)
  call MPI_Type_free(tint)

  ! A window.
  call MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, count_win, wkey, 0_MPI_ADDRESS_KIND)
  size = 16
  call MPI_Win_create(buf, size, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win)
  call MPI_Win_set_attr(win, wkey, 7_MPI_ADDRESS_KIND)
  call MPI_Win_get_attr(win, wkey, v, flag)
  if (rank == 0) print '(a,l2)', 'f08_correct: window attribute', flag .and. v == 7
  call MPI_Win_get_attr(win, MPI_WIN_SIZE, v, flag)
  if (rank == 0) print '(a,l2)', 'f08_correct: MPI_WIN_SIZE', flag .and. v == 16
  call MPI_Win_free(win)

  call MPI_Comm_free_keyval(dupkey)
  call MPI_Comm_free_keyval(pluskey)
  call MPI_Type_free_keyval(tkey)
  call MPI_Win_free_keyval(wkey)
  if (rank == 0) print '(a,i0,a,i0,a,l2)', 'f08_correct: copies ', copies, ', deletes ', deletes, &
    ', deleted values right', deleted_sum == 10 + 11 + 100 + 2 * big + 7
  call MPI_Finalize()
end program f08_correct
