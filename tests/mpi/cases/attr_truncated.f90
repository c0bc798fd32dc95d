! attrcheck-test: np=2 modes=shadow,emulate
! expect: attr.truncated deprecated.call
! clean
! exit: 0
! native: same-stdout
! attr.truncated: a value set with MPI_COMM_SET_ATTR as INTEGER(KIND=MPI_ADDRESS_KIND) that does
! not fit a default INTEGER, read back with the deprecated MPI_ATTR_GET. The standard says
! MPI_ATTR_GET returns the least significant part of the attribute word: 2**40 + 5 reads as 5.
! MPI_COMM_GET_ATTR reads it exactly. A value that fits (42) read with MPI_ATTR_GET is not
! truncated (deprecated.call only).
program attr_truncated
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, key, key_small
  integer(kind=MPI_ADDRESS_KIND) :: big, small, exact
  integer :: short_val, small_val
  logical :: flag_exact, flag_short, flag_small

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)

  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, key, &
                              0_MPI_ADDRESS_KIND, ierr)
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, key_small, &
                              0_MPI_ADDRESS_KIND, ierr)

  big = int(2, kind=MPI_ADDRESS_KIND)**40 + 5_MPI_ADDRESS_KIND
  small = 42_MPI_ADDRESS_KIND
  call MPI_COMM_SET_ATTR(MPI_COMM_WORLD, key, big, ierr)
  call MPI_COMM_SET_ATTR(MPI_COMM_WORLD, key_small, small, ierr)

  exact = -1
  flag_exact = .false.
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, key, exact, flag_exact, ierr)

  short_val = -1
  flag_short = .false.
  call MPI_ATTR_GET(MPI_COMM_WORLD, key, short_val, flag_short, ierr)   ! deprecated, truncates

  small_val = -1
  flag_small = .false.
  call MPI_ATTR_GET(MPI_COMM_WORLD, key_small, small_val, flag_small, ierr)   ! deprecated, fits

  if (rank == 0) then
    write (*, '(A,L1,A,I0)') 'attr_truncated: MPI_COMM_GET_ATTR flag ', flag_exact, ' value ', exact
    write (*, '(A,L1,A,I0)') 'attr_truncated: MPI_ATTR_GET flag ', flag_short, ' value ', short_val
    write (*, '(A,L1,A,I0)') 'attr_truncated: MPI_ATTR_GET of 42 flag ', flag_small, ' value ', small_val
  end if

  call MPI_COMM_DELETE_ATTR(MPI_COMM_WORLD, key, ierr)
  call MPI_COMM_DELETE_ATTR(MPI_COMM_WORLD, key_small, ierr)
  call MPI_COMM_FREE_KEYVAL(key, ierr)
  call MPI_COMM_FREE_KEYVAL(key_small, ierr)
  if (rank == 0) then
    write (*, '(A,L1)') 'attr_truncated: keyvals invalidated ', &
      key == MPI_KEYVAL_INVALID .and. key_small == MPI_KEYVAL_INVALID
  end if
  call MPI_FINALIZE(ierr)
end program attr_truncated
