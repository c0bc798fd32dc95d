! attrcheck-test: np=2 modes=shadow,emulate
! expect: keyval.double-free keyval.kind-mismatch object.invalid
! clean
! exit: 0
! Erroneous attribute calls from Fortran (mpif.h), with MPI_ERRORS_RETURN set: a comm keyval freed
! a second time through a saved copy, a datatype keyval used in MPI_COMM_GET_ATTR, and
! MPI_COMM_SET_ATTR on MPI_COMM_NULL. The program prints whether each call returned an error.
! No native: same-stdout: natively Open MPI 4.1.4 accepts the datatype keyval on a communicator
! get (flag .FALSE.), and its Fortran bindings return raw internal error codes.
program fortran_errors
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, key, saved, tkey, ckey
  integer(kind=MPI_ADDRESS_KIND) :: val
  logical :: flag

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_SELF, MPI_ERRORS_RETURN, ierr)

  ! 1. keyval.double-free: the free sets key to MPI_KEYVAL_INVALID, the saved copy is stale
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, key, 0_MPI_ADDRESS_KIND, ierr)
  saved = key
  call MPI_COMM_FREE_KEYVAL(key, ierr)
  if (rank == 0) call report('first free', ierr)
  call MPI_COMM_FREE_KEYVAL(saved, ierr)                      ! erroneous
  if (rank == 0) call report('second free through a saved copy', ierr)

  ! 2. keyval.kind-mismatch: a datatype keyval in MPI_COMM_GET_ATTR
  call MPI_TYPE_CREATE_KEYVAL(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, tkey, 0_MPI_ADDRESS_KIND, ierr)
  val = -1
  flag = .true.
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, tkey, val, flag, ierr)   ! erroneous
  if (rank == 0) call report('datatype keyval in MPI_COMM_GET_ATTR', ierr)
  call MPI_TYPE_FREE_KEYVAL(tkey, ierr)

  ! 3. object.invalid: MPI_COMM_SET_ATTR on MPI_COMM_NULL
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, ckey, 0_MPI_ADDRESS_KIND, ierr)
  val = 5
  call MPI_COMM_SET_ATTR(MPI_COMM_NULL, ckey, val, ierr)          ! erroneous
  if (rank == 0) call report('MPI_COMM_SET_ATTR on MPI_COMM_NULL', ierr)
  call MPI_COMM_FREE_KEYVAL(ckey, ierr)

  if (rank == 0) write (*, '(A)') 'fortran_errors: done'
  call MPI_FINALIZE(ierr)

contains

  subroutine report(what, code)
    character(len=*), intent(in) :: what
    integer, intent(in) :: code
    if (code /= MPI_SUCCESS) then
      write (*, '(A,A,A)') 'fortran_errors: ', what, ': error returned'
    else
      write (*, '(A,A,A)') 'fortran_errors: ', what, ': no error'
    end if
  end subroutine report

end program fortran_errors
