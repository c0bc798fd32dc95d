! attrcheck-test: np=2 modes=shadow,emulate
! expect: attr.truncated deprecated.call
! expect-at: attr.truncated mpif_interop.f:53
! clean
! exit: 0
! native: same-stdout
! The standard's attribute interoperability examples (MPI-3.1
! 17.2.7) between fixed-form Fortran (include 'mpif.h', with the
! MPI-1 calls) and C helpers (helpers/mpif_interop.c). C sets
! addresses and 17: MPI_COMM_GET_ATTR reads them exactly, MPI_ATTR_GET
! reads 17 and the addresses' low halves (attr.truncated: the
! standard's "possibly truncated", which a 64-bit address is).
! MPI_ATTR_PUT sets 7: C reads a pointer to an int holding 7, both
! Fortran reads 7. MPI_COMM_SET_ATTR sets 42 and 2**40: C reads
! pointers to MPI_Aint holding them, MPI_ATTR_GET reads 42 (2**40
! truncated again). No impl.divergence: the libraries are right.
      program mpif_interop
      include 'mpif.h'
      integer ierr, rank, comm, k1, k2, k3, km, f1, f2, i17, i7, i42
      integer itrunc
      integer(kind=MPI_ADDRESS_KIND) aval, astruct, g1, g2, g3, big
      integer(kind=MPI_ADDRESS_KIND) zero
      logical fl1, fl2, fl3
      integer c_get_mpi1_set, c_get_mpi2_set
      external c_get_mpi1_set, c_get_mpi2_set
      zero = 0
      big = int(2, kind=MPI_ADDRESS_KIND)**40
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_DUP(MPI_COMM_WORLD, comm, ierr)
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN,
     &     MPI_COMM_NULL_DELETE_FN, k1, zero, ierr)
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN,
     &     MPI_COMM_NULL_DELETE_FN, k2, zero, ierr)
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN,
     &     MPI_COMM_NULL_DELETE_FN, k3, zero, ierr)
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN,
     &     MPI_COMM_NULL_DELETE_FN, km, zero, ierr)
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN,
     &     MPI_COMM_NULL_DELETE_FN, f1, zero, ierr)
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN,
     &     MPI_COMM_NULL_DELETE_FN, f2, zero, ierr)

!     Example 1: set in C; read with MPI-2 and MPI-1 Fortran calls.
      call c_set_attrs(comm, k1, k2, k3, aval, astruct)
      call MPI_COMM_GET_ATTR(comm, k1, g1, fl1, ierr)
      call MPI_COMM_GET_ATTR(comm, k2, g2, fl2, ierr)
      call MPI_COMM_GET_ATTR(comm, k3, g3, fl3, ierr)
      if (rank .eq. 0) print '(a,l2)', 'mpif_interop: ex1 MPI-2 get',
     &   fl1 .and. fl2 .and. fl3 .and. g1 .eq. aval .and.
     &   g2 .eq. astruct .and. g3 .eq. 17
      call MPI_ATTR_GET(comm, k3, i17, fl3, ierr)
      call MPI_ATTR_GET(comm, k1, itrunc, fl1, ierr)
      if (rank .eq. 0) print '(a,l2)', 'mpif_interop: ex1 MPI-1 get',
     &   fl1 .and. fl3 .and. i17 .eq. 17

!     Example 2: set with MPI_ATTR_PUT; read in C and Fortran.
      call MPI_ATTR_PUT(comm, km, 7, ierr)
      call MPI_ATTR_GET(comm, km, i7, fl1, ierr)
      call MPI_COMM_GET_ATTR(comm, km, g1, fl2, ierr)
      if (rank .eq. 0) print '(a,l2)', 'mpif_interop: ex2',
     &   c_get_mpi1_set(comm, km) .eq. 1 .and. fl1 .and. i7 .eq. 7
     &   .and. fl2 .and. g1 .eq. 7

!     Example 3: set with MPI_COMM_SET_ATTR; read in C and Fortran.
      g1 = 42
      call MPI_COMM_SET_ATTR(comm, f1, g1, ierr)
      call MPI_COMM_SET_ATTR(comm, f2, big, ierr)
      call MPI_ATTR_GET(comm, f1, i42, fl1, ierr)
      call MPI_ATTR_GET(comm, f2, itrunc, fl2, ierr)
      if (rank .eq. 0) print '(a,l2)', 'mpif_interop: ex3',
     &   c_get_mpi2_set(comm, f1, f2) .eq. 1 .and. fl1 .and.
     &   i42 .eq. 42 .and. fl2

      call MPI_COMM_FREE(comm, ierr)
      call MPI_COMM_FREE_KEYVAL(k1, ierr)
      call MPI_COMM_FREE_KEYVAL(k2, ierr)
      call MPI_COMM_FREE_KEYVAL(k3, ierr)
      call MPI_COMM_FREE_KEYVAL(km, ierr)
      call MPI_COMM_FREE_KEYVAL(f1, ierr)
      call MPI_COMM_FREE_KEYVAL(f2, ierr)
      call MPI_FINALIZE(ierr)
      end
