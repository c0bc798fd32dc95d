! attrcheck-test: np=2 modes=shadow,emulate
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! native: same-stdout
! A correct Fortran (mpif.h) program using the MPI-2 attribute interface with Fortran copy and
! delete callbacks: values are INTEGER(KIND=MPI_ADDRESS_KIND) and must survive exactly (2**40 + 1
! does not fit a default INTEGER), callbacks get the extra_state given at keyval creation, a copy
! callback that returns flag = .FALSE. does not copy, and datatype attributes work with the
! predefined MPI_TYPE_DUP_FN / MPI_TYPE_NULL_DELETE_FN and with Fortran callbacks.
subroutine copy_plus_one(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror)
  implicit none
  include 'mpif.h'
  integer :: oldcomm, comm_keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
  logical :: flag
  integer :: copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  integer(kind=MPI_ADDRESS_KIND) :: last_extra, last_deleted_a, last_deleted_t
  common /cb_counts/ copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  common /cb_values/ last_extra, last_deleted_a, last_deleted_t
  integer :: result
  copies_a = copies_a + 1
  last_extra = extra_state
  call MPI_COMM_COMPARE(oldcomm, MPI_COMM_WORLD, result, ierror)
  if (result /= MPI_IDENT) copies_a = copies_a + 1000
  if (comm_keyval == MPI_KEYVAL_INVALID) copies_a = copies_a + 1000
  attribute_val_out = attribute_val_in + 1
  flag = .true.
  ierror = MPI_SUCCESS
end subroutine copy_plus_one

subroutine delete_a(comm, comm_keyval, attribute_val, extra_state, ierror)
  implicit none
  include 'mpif.h'
  integer :: comm, comm_keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
  integer :: copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  integer(kind=MPI_ADDRESS_KIND) :: last_extra, last_deleted_a, last_deleted_t
  common /cb_counts/ copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  common /cb_values/ last_extra, last_deleted_a, last_deleted_t
  ! comm is not looked at: Open MPI 4.1.4 passes a wrong handle (0) to Fortran delete callbacks
  deletes_a = deletes_a + 1
  last_deleted_a = attribute_val
  last_extra = extra_state
  if (comm_keyval == MPI_KEYVAL_INVALID) deletes_a = deletes_a + 1000
  ierror = MPI_SUCCESS
end subroutine delete_a

subroutine copy_never(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror)
  implicit none
  include 'mpif.h'
  integer :: oldcomm, comm_keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
  logical :: flag
  integer :: copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  common /cb_counts/ copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  copies_b = copies_b + 1
  if (oldcomm == MPI_COMM_NULL .or. comm_keyval == MPI_KEYVAL_INVALID .or. extra_state /= 0) &
    copies_b = copies_b + 1000
  attribute_val_out = attribute_val_in   ! ignored: flag is .FALSE.
  flag = .false.
  ierror = MPI_SUCCESS
end subroutine copy_never

subroutine delete_b(comm, comm_keyval, attribute_val, extra_state, ierror)
  implicit none
  include 'mpif.h'
  integer :: comm, comm_keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
  integer :: copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  common /cb_counts/ copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  deletes_b = deletes_b + 1
  if (comm_keyval == MPI_KEYVAL_INVALID .or. extra_state /= 0) deletes_b = deletes_b + 1000
  if (attribute_val /= 77) deletes_b = deletes_b + 1000
  ierror = MPI_SUCCESS
end subroutine delete_b

subroutine type_copy(oldtype, type_keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror)
  implicit none
  include 'mpif.h'
  integer :: oldtype, type_keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
  logical :: flag
  integer :: copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  common /cb_counts/ copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  tcopies = tcopies + 1
  if (oldtype == MPI_DATATYPE_NULL .or. type_keyval == MPI_KEYVAL_INVALID .or. extra_state /= 3) &
    tcopies = tcopies + 1000
  attribute_val_out = attribute_val_in * 2
  flag = .true.
  ierror = MPI_SUCCESS
end subroutine type_copy

subroutine type_delete(datatype, type_keyval, attribute_val, extra_state, ierror)
  implicit none
  include 'mpif.h'
  integer :: datatype, type_keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
  integer :: copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  integer(kind=MPI_ADDRESS_KIND) :: last_extra, last_deleted_a, last_deleted_t
  common /cb_counts/ copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  common /cb_values/ last_extra, last_deleted_a, last_deleted_t
  tdeletes = tdeletes + 1
  last_deleted_t = attribute_val
  ! datatype is not looked at: Open MPI 4.1.4 passes a wrong handle to Fortran delete callbacks
  if (type_keyval == MPI_KEYVAL_INVALID .or. extra_state /= 3) tdeletes = tdeletes + 1000
  ierror = MPI_SUCCESS
end subroutine type_delete

program fortran_callbacks
  implicit none
  include 'mpif.h'
  external copy_plus_one, delete_a, copy_never, delete_b, type_copy, type_delete
  integer :: copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  integer(kind=MPI_ADDRESS_KIND) :: last_extra, last_deleted_a, last_deleted_t
  common /cb_counts/ copies_a, deletes_a, copies_b, deletes_b, tcopies, tdeletes
  common /cb_values/ last_extra, last_deleted_a, last_deleted_t
  integer :: ierr, rank, key_a, key_b, tkey, tkey_f, dup, ctype, tdup
  integer(kind=MPI_ADDRESS_KIND) :: val, got, tval, tgot, tgot_f
  logical :: flag, tflag, tflag_f

  copies_a = 0
  deletes_a = 0
  copies_b = 0
  deletes_b = 0
  tcopies = 0
  tdeletes = 0
  last_extra = -1
  last_deleted_a = -1
  last_deleted_t = -1
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)

  ! 1. a copy callback that copies value + 1, and a delete callback that records the value
  call MPI_COMM_CREATE_KEYVAL(copy_plus_one, delete_a, key_a, 7_MPI_ADDRESS_KIND, ierr)
  val = int(2, kind=MPI_ADDRESS_KIND)**40 + 1_MPI_ADDRESS_KIND
  call MPI_COMM_SET_ATTR(MPI_COMM_WORLD, key_a, val, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
  got = -1
  flag = .false.
  call MPI_COMM_GET_ATTR(dup, key_a, got, flag, ierr)
  if (rank == 0) write (*, '(A,I0,A,L1,A,I0,A,I0)') 'fortran_callbacks: after dup copies ', copies_a, &
    ' dup flag ', flag, ' dup value ', got, ' extra ', last_extra
  got = -1
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, key_a, got, flag, ierr)
  if (rank == 0) write (*, '(A,L1,A,I0)') 'fortran_callbacks: original flag ', flag, ' value ', got
  call MPI_COMM_FREE(dup, ierr)
  if (rank == 0) write (*, '(A,I0,A,I0,A,L1)') 'fortran_callbacks: after dup free deletes ', deletes_a, &
    ' deleted value ', last_deleted_a, ' dup is null ', dup == MPI_COMM_NULL
  call MPI_COMM_DELETE_ATTR(MPI_COMM_WORLD, key_a, ierr)
  if (rank == 0) write (*, '(A,I0,A,I0)') 'fortran_callbacks: after delete_attr deletes ', deletes_a, &
    ' deleted value ', last_deleted_a
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, key_a, got, flag, ierr)
  if (rank == 0) write (*, '(A,L1)') 'fortran_callbacks: original flag after delete_attr ', flag
  call MPI_COMM_FREE_KEYVAL(key_a, ierr)
  if (rank == 0) write (*, '(A,L1)') 'fortran_callbacks: key_a invalidated ', key_a == MPI_KEYVAL_INVALID

  ! 2. a copy callback that returns flag = .FALSE.: the dup has no attribute
  call MPI_COMM_CREATE_KEYVAL(copy_never, delete_b, key_b, 0_MPI_ADDRESS_KIND, ierr)
  val = 77
  call MPI_COMM_SET_ATTR(MPI_COMM_WORLD, key_b, val, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
  flag = .true.
  call MPI_COMM_GET_ATTR(dup, key_b, got, flag, ierr)
  call MPI_COMM_FREE(dup, ierr)
  if (rank == 0) write (*, '(A,I0,A,L1,A,I0)') 'fortran_callbacks: not copied: copies ', copies_b, &
    ' dup flag ', flag, ' deletes after dup free ', deletes_b
  call MPI_COMM_DELETE_ATTR(MPI_COMM_WORLD, key_b, ierr)
  call MPI_COMM_FREE_KEYVAL(key_b, ierr)
  if (rank == 0) write (*, '(A,I0)') 'fortran_callbacks: not copied: deletes after delete_attr ', deletes_b

  ! 3. datatype attributes: predefined MPI_TYPE_DUP_FN / MPI_TYPE_NULL_DELETE_FN, and Fortran callbacks
  call MPI_TYPE_CONTIGUOUS(4, MPI_INTEGER, ctype, ierr)
  call MPI_TYPE_COMMIT(ctype, ierr)
  call MPI_TYPE_CREATE_KEYVAL(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, tkey, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_TYPE_CREATE_KEYVAL(type_copy, type_delete, tkey_f, 3_MPI_ADDRESS_KIND, ierr)
  tval = int(3, kind=MPI_ADDRESS_KIND)**30
  call MPI_TYPE_SET_ATTR(ctype, tkey, tval, ierr)
  tval = 21
  call MPI_TYPE_SET_ATTR(ctype, tkey_f, tval, ierr)
  call MPI_TYPE_DUP(ctype, tdup, ierr)
  tgot = -1
  tflag = .false.
  call MPI_TYPE_GET_ATTR(tdup, tkey, tgot, tflag, ierr)
  tgot_f = -1
  tflag_f = .false.
  call MPI_TYPE_GET_ATTR(tdup, tkey_f, tgot_f, tflag_f, ierr)
  if (rank == 0) write (*, '(A,L1,A,I0,A,L1,A,I0,A,I0)') 'fortran_callbacks: type dup: dup_fn flag ', tflag, &
    ' value ', tgot, ' fortran flag ', tflag_f, ' value ', tgot_f, ' copies ', tcopies
  call MPI_TYPE_FREE(tdup, ierr)
  if (rank == 0) write (*, '(A,I0,A,I0,A,L1)') 'fortran_callbacks: type dup freed: deletes ', tdeletes, &
    ' deleted value ', last_deleted_t, ' handle null ', tdup == MPI_DATATYPE_NULL
  call MPI_TYPE_FREE(ctype, ierr)
  if (rank == 0) write (*, '(A,I0,A,I0)') 'fortran_callbacks: type freed: deletes ', tdeletes, &
    ' deleted value ', last_deleted_t
  call MPI_TYPE_FREE_KEYVAL(tkey, ierr)
  call MPI_TYPE_FREE_KEYVAL(tkey_f, ierr)
  if (rank == 0) write (*, '(A,L1)') 'fortran_callbacks: type keyvals invalidated ', &
    tkey == MPI_KEYVAL_INVALID .and. tkey_f == MPI_KEYVAL_INVALID

  if (rank == 0) write (*, '(A,6(1X,I0))') 'fortran_callbacks: final counts', copies_a, deletes_a, &
    copies_b, deletes_b, tcopies, tdeletes
  call MPI_FINALIZE(ierr)
end program fortran_callbacks
