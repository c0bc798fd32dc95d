! attrcheck-test: np=2 modes=shadow,emulate
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! native: same-stdout
! `use mpi_f08` MPI_File_get_view returns a new filetype the user frees, and its CHARACTER datarep
! (a hidden length argument the wrapper forwards): an attribute on the returned filetype, deleted
! when it is freed. The program checks the values itself and fails otherwise.
module f08_file_get_view_cbs
  use mpi_f08
  implicit none
  integer :: deletes = 0
  logical :: all_ok = .true.
contains
  subroutine check(rank, what, ok)
    integer :: rank
    character(len=*) :: what
    logical :: ok
    if (rank == 0) print '(a,a,l2)', 'f08_file_get_view: ', what, ok
    all_ok = all_ok .and. ok
  end subroutine check

  subroutine type_count(datatype, type_keyval, attribute_val, extra_state, ierror)
    type(MPI_Datatype) :: datatype
    integer :: type_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    deletes = deletes + 1
    ierror = MPI_SUCCESS
  end subroutine type_count
end module f08_file_get_view_cbs

program f08_file_get_view
  use mpi_f08
  use f08_file_get_view_cbs
  implicit none
  integer :: rank, tkey
  integer(kind=MPI_ADDRESS_KIND) :: v
  integer(kind=MPI_OFFSET_KIND) :: disp
  logical :: flag
  type(MPI_Datatype) :: etype, filetype, viewtype
  type(MPI_File) :: fh
  character(len=MPI_MAX_DATAREP_STRING) :: datarep

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_count, tkey, 0_MPI_ADDRESS_KIND)

  ! MPI_File_get_view: a new filetype, and the datarep string.
  call MPI_Type_vector(2, 1, 2, MPI_INTEGER, filetype)
  call MPI_Type_commit(filetype)
  call MPI_File_open(MPI_COMM_WORLD, 'f08_file_get_view.tmp', MPI_MODE_CREATE + MPI_MODE_RDWR + &
                     MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, fh)
  call MPI_File_set_view(fh, 0_MPI_OFFSET_KIND, MPI_INTEGER, filetype, 'native', MPI_INFO_NULL)
  call MPI_Type_free(filetype)
  datarep = '?'
  call MPI_File_get_view(fh, disp, etype, viewtype, datarep)
  call check(rank, 'get_view: datarep native', trim(datarep) == 'native')
  call MPI_Type_set_attr(viewtype, tkey, 6_MPI_ADDRESS_KIND)
  call MPI_Type_get_attr(viewtype, tkey, v, flag)
  call check(rank, 'an attribute on the returned filetype', flag .and. v == 6)
  call MPI_Type_free(viewtype)
  call check(rank, 'its delete callback ran', deletes == 1)
  call MPI_File_close(fh)

  call MPI_Type_free_keyval(tkey)
  call MPI_Finalize()
  if (.not. all_ok) error stop 1
end program f08_file_get_view
