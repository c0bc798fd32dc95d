! attrcheck-test: np=2 modes=shadow,emulate
! expect: deprecated.call
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! native: same-stdout
! deprecated.call from Fortran: the MPI-1 attribute interface (MPI_KEYVAL_CREATE, MPI_ATTR_PUT,
! MPI_ATTR_GET, MPI_ATTR_DELETE, MPI_KEYVAL_FREE) used correctly through mpif.h, with user-written
! Fortran callbacks (no deprecated constants such as MPI_NULL_COPY_FN / MPI_DUP_FN).
subroutine old_copy(oldcomm, keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierr)
  implicit none
  include 'mpif.h'
  integer :: oldcomm, keyval, extra_state, attribute_val_in, attribute_val_out, ierr
  logical :: flag
  integer :: copies, deletes, last_deleted
  common /old_counts/ copies, deletes, last_deleted
  copies = copies + 1
  attribute_val_out = attribute_val_in
  flag = .true.
  ierr = MPI_SUCCESS
end subroutine old_copy

subroutine old_delete(comm, keyval, attribute_val, extra_state, ierr)
  implicit none
  include 'mpif.h'
  integer :: comm, keyval, attribute_val, extra_state, ierr
  integer :: copies, deletes, last_deleted
  common /old_counts/ copies, deletes, last_deleted
  deletes = deletes + 1
  last_deleted = attribute_val
  ierr = MPI_SUCCESS
end subroutine old_delete

program fortran_deprecated
  implicit none
  include 'mpif.h'
  external old_copy, old_delete
  integer :: ierr, rank, key, extra, val, got, got_dup, got_after, dup
  logical :: flag, flag_dup, flag_after
  integer :: copies, deletes, last_deleted
  common /old_counts/ copies, deletes, last_deleted

  copies = 0
  deletes = 0
  last_deleted = -1
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)

  extra = 0
  call MPI_KEYVAL_CREATE(old_copy, old_delete, key, extra, ierr)     ! deprecated
  val = 99
  call MPI_ATTR_PUT(MPI_COMM_WORLD, key, val, ierr)                   ! deprecated
  got = -1
  flag = .false.
  call MPI_ATTR_GET(MPI_COMM_WORLD, key, got, flag, ierr)             ! deprecated
  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)                        ! runs old_copy
  got_dup = -1
  flag_dup = .false.
  call MPI_ATTR_GET(dup, key, got_dup, flag_dup, ierr)                ! deprecated
  call MPI_COMM_FREE(dup, ierr)                                       ! runs old_delete
  call MPI_ATTR_DELETE(MPI_COMM_WORLD, key, ierr)                     ! deprecated, runs old_delete
  flag_after = .true.
  call MPI_ATTR_GET(MPI_COMM_WORLD, key, got_after, flag_after, ierr)     ! deprecated, now absent
  call MPI_KEYVAL_FREE(key, ierr)                                     ! deprecated

  if (rank == 0) then
    write (*, '(A,L1,A,I0,A,L1,A,I0,A,L1)') 'fortran_deprecated: read flag ', flag, ' value ', got, &
      ' on dup flag ', flag_dup, ' value ', got_dup, ' after delete flag ', flag_after
    write (*, '(A,I0,A,I0,A,I0)') 'fortran_deprecated: delete callbacks ', deletes, &
      ' deleted value ', last_deleted, ' copies ', copies
    write (*, '(A,L1)') 'fortran_deprecated: key invalidated ', key == MPI_KEYVAL_INVALID
  end if
  call MPI_FINALIZE(ierr)
end program fortran_deprecated
