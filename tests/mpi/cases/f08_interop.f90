! attrcheck-test: np=2 modes=shadow,emulate
! clean
! exit: 0
! native: same-stdout
! A `use mpi_f08` main and C helpers (helpers/f08_interop.c) sharing keyvals and attributes on
! one communicator: the standard's attribute interoperability examples (MPI-3.1 17.2.7) that
! mpi_f08 can express. C sets a pointer to an int, a pointer to a struct and the integer 17;
! Fortran's MPI_Comm_get_attr reads the addresses and 17. Fortran sets 42 and 2**40; C reads
! pointers to MPI_Aint holding them. A C copy callback run by a Fortran MPI_Comm_dup gets a
! pointer to a Fortran-set value. C deletes a Fortran-set attribute and frees a Fortran-created
! keyval. Every call is correct: nothing may be reported, in either mode.
program f08_interop
  use mpi_f08
  implicit none
  interface
    subroutine c_set_attrs(comm, k1, k2, k3, addr_val, addr_struct) bind(C, name='c_set_attrs')
      import :: MPI_ADDRESS_KIND
      integer :: comm, k1, k2, k3
      integer(kind=MPI_ADDRESS_KIND) :: addr_val, addr_struct
    end subroutine
    integer function c_get_own(comm, k1, k2, k3) bind(C, name='c_get_own')
      integer :: comm, k1, k2, k3
    end function
    integer function c_get_fortran_set(comm, k1, k2) bind(C, name='c_get_fortran_set')
      integer :: comm, k1, k2
    end function
    subroutine c_delete_and_free(comm, key) bind(C, name='c_delete_and_free')
      integer :: comm, key
    end subroutine
    subroutine c_make_copying_key(key) bind(C, name='c_make_copying_key')
      integer :: key
    end subroutine
    integer function c_copies_of_42() bind(C, name='c_copies_of_42')
    end function
  end interface
  integer :: rank, k1, k2, k3, f1, f2, ck
  integer(kind=MPI_ADDRESS_KIND) :: addr_val, addr_struct, get_val, get_struct, get_17, v1, v2
  logical :: flag1, flag2, flag3
  type(MPI_Comm) :: comm, dup

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_dup(MPI_COMM_WORLD, comm)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, k1, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, k2, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, k3, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, f1, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, f2, 0_MPI_ADDRESS_KIND)

  ! Example 1: set in C, read in C and with Fortran MPI-2 calls.
  call c_set_attrs(comm%MPI_VAL, k1, k2, k3, addr_val, addr_struct)
  call MPI_Comm_get_attr(comm, k1, get_val, flag1)
  call MPI_Comm_get_attr(comm, k2, get_struct, flag2)
  call MPI_Comm_get_attr(comm, k3, get_17, flag3)
  if (rank == 0) print '(a,l2)', 'f08_interop: C-set values read in Fortran', &
    flag1 .and. flag2 .and. flag3 .and. get_val == addr_val .and. get_struct == addr_struct .and. get_17 == 17
  if (rank == 0) print '(a,l2)', 'f08_interop: C-set values read in C', c_get_own(comm%MPI_VAL, k1, k2, k3) == 1

  ! Example 3: set with Fortran MPI-2 calls, read in C (pointers to the stored MPI_Aint) and Fortran.
  v1 = 42
  v2 = int(2, kind=MPI_ADDRESS_KIND)**40
  call MPI_Comm_set_attr(comm, f1, v1)
  call MPI_Comm_set_attr(comm, f2, v2)
  if (rank == 0) print '(a,l2)', 'f08_interop: Fortran-set values read in C', &
    c_get_fortran_set(comm%MPI_VAL, f1, f2) == 1
  v1 = 0
  v2 = 0
  call MPI_Comm_get_attr(comm, f1, v1, flag1)
  call MPI_Comm_get_attr(comm, f2, v2, flag2)
  if (rank == 0) print '(a,l2)', 'f08_interop: Fortran-set values read in Fortran', &
    flag1 .and. flag2 .and. v1 == 42 .and. v2 == int(2, kind=MPI_ADDRESS_KIND)**40

  ! A C copy callback of a Fortran-set value: a pointer to the stored MPI_Aint; C-set copy 43.
  call c_make_copying_key(ck)
  call MPI_Comm_set_attr(comm, ck, 42_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(comm, dup)
  call MPI_Comm_get_attr(dup, ck, v1, flag1)
  if (rank == 0) print '(a,l2)', 'f08_interop: C copy callback of a Fortran-set value', &
    c_copies_of_42() == 1 .and. flag1 .and. v1 == 43
  call MPI_Comm_free(dup)
  call MPI_Comm_delete_attr(comm, ck)
  call MPI_Comm_free_keyval(ck)

  call MPI_Comm_delete_attr(comm, k1)
  call MPI_Comm_delete_attr(comm, k2)
  call MPI_Comm_delete_attr(comm, k3)
  call c_delete_and_free(comm%MPI_VAL, f1)
  call MPI_Comm_free(comm)  ! f2's attribute goes with it
  call MPI_Comm_free_keyval(k1)
  call MPI_Comm_free_keyval(k2)
  call MPI_Comm_free_keyval(k3)
  call MPI_Comm_free_keyval(f2)
  if (rank == 0) print '(a,l2)', 'f08_interop: keyval freed in C', f1 == MPI_KEYVAL_INVALID
  call MPI_Finalize()
end program f08_interop
