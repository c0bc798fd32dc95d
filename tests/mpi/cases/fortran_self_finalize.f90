! attrcheck-test: np=2 modes=shadow,emulate
! divergence: fortran-delete-callback-wrong-handle?
! clean
! exit: 0
! native: same-stdout
! The HDF5 pattern from Fortran (mpif.h): a library registers its shutdown as a Fortran delete
! callback on MPI_COMM_SELF and frees the keyval right after the set. MPI_FINALIZE deletes
! MPI_COMM_SELF's attributes first, so the callback runs at the start of MPI_FINALIZE, while MPI is
! still fully usable. The callback does not use its comm argument (Open MPI passes a wrong handle
! to Fortran delete callbacks: an arbitrary value, which in some runs on Open MPI 5.0.7 is
! MPI_COMM_SELF's own, so the divergence's note may be missing); it uses MPI_COMM_WORLD.
subroutine library_close(comm, comm_keyval, attribute_val, extra_state, ierror)
  implicit none
  include 'mpif.h'
  integer :: comm, comm_keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
  integer :: my_rank, closes
  common /library_state/ my_rank, closes
  integer :: open_files, total, ierr
  logical :: flag
  integer(kind=MPI_ADDRESS_KIND) :: tag_ub
  closes = closes + 1
  ! MPI still works here: read a predefined attribute and do a collective on MPI_COMM_WORLD.
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, MPI_TAG_UB, tag_ub, flag, ierr)
  open_files = int(attribute_val)
  total = 0
  call MPI_ALLREDUCE(open_files, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (my_rank == 0) then
    write (*, '(A,I0,A,L1,A,I0,A,I0)') 'fortran_self_finalize: self delete callback ran (call ', closes, &
      '), tag_ub readable ', flag .and. tag_ub >= 32767, ', open files closed ', total, &
      ', extra ', extra_state
    flush (6)
  end if
  ierror = MPI_SUCCESS
end subroutine library_close

program fortran_self_finalize
  implicit none
  include 'mpif.h'
  external library_close
  integer :: my_rank, closes
  common /library_state/ my_rank, closes
  integer :: ierr, key
  integer(kind=MPI_ADDRESS_KIND) :: files

  closes = 0
  my_rank = -1
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, my_rank, ierr)

  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, library_close, key, 11_MPI_ADDRESS_KIND, ierr)
  files = 3
  call MPI_COMM_SET_ATTR(MPI_COMM_SELF, key, files, ierr)
  call MPI_COMM_FREE_KEYVAL(key, ierr)   ! right after the set: the attribute keeps the key alive

  if (my_rank == 0) then
    write (*, '(A,L1)') 'fortran_self_finalize: keyval freed after set, handle invalidated ', &
      key == MPI_KEYVAL_INVALID
    write (*, '(A,I0)') 'fortran_self_finalize: calling MPI_FINALIZE, callbacks so far ', closes
    flush (6)
  end if
  call MPI_FINALIZE(ierr)
  if (my_rank == 0) write (*, '(A,I0)') 'fortran_self_finalize: after MPI_FINALIZE, callbacks ', closes
end program fortran_self_finalize
