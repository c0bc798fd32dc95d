! attrcheck-test: np=2 modes=shadow,emulate
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! native: same-stdout
! A correct fixed-form program (include 'mpif.h') whose objects all
! come from Fortran constructors: attributes on communicators made
! by MPI_COMM_SPLIT, MPI_COMM_IDUP (+ MPI_WAIT) and MPI_CART_CREATE,
! on datatypes made by MPI_TYPE_VECTOR, MPI_TYPE_CREATE_STRUCT,
! MPI_TYPE_CREATE_RESIZED and MPI_TYPE_DUP, and on a window made by
! MPI_WIN_ALLOCATE; Fortran copy callbacks add their extra_state,
! Fortran delete callbacks sum what they delete (the program checks
! the values itself and fails otherwise). Nothing may be reported
! but the library's known divergence.
      subroutine check(rank, what, ok)
      integer rank
      character*(*) what
      logical ok, allok
      common /okay/ allok
      if (rank .eq. 0) print '(a,a,l2)', 'mpif_constructors: ',
     &   what, ok
      allok = allok .and. ok
      end

      subroutine plus_extra(old, key, extra, valin, valout, flag, ierr)
      include 'mpif.h'
      integer old, key, ierr
      integer(kind=MPI_ADDRESS_KIND) extra, valin, valout
      logical flag
      integer copies, deletes
      integer(kind=MPI_ADDRESS_KIND) dsum
      common /counts/ dsum, copies, deletes
      copies = copies + 1
      valout = valin + extra
      flag = .true.
      ierr = MPI_SUCCESS
      end

      subroutine count_delete(obj, key, val, extra, ierr)
      include 'mpif.h'
!     obj is not looked at: Open MPI 4.1.4 passes a wrong handle
      integer obj, key, ierr
      integer(kind=MPI_ADDRESS_KIND) val, extra
      integer copies, deletes
      integer(kind=MPI_ADDRESS_KIND) dsum
      common /counts/ dsum, copies, deletes
      deletes = deletes + 1
      dsum = dsum + val
      ierr = MPI_SUCCESS
      end

      program mpif_constructors
      include 'mpif.h'
      integer ierr, rank, nprocs, ckey, dkey, tkey, wkey
      integer split, idup, cart, req, dims(1), blocks(2), types(2)
      integer vec, struct, resized, rdup, win
      integer(kind=MPI_ADDRESS_KIND) v, zero, one, two, wsize, base
      integer(kind=MPI_ADDRESS_KIND) displs(2), extent
      logical flag, periods(1)
      integer copies, deletes
      integer(kind=MPI_ADDRESS_KIND) dsum
      common /counts/ dsum, copies, deletes
      logical allok
      common /okay/ allok
      external plus_extra, count_delete
      allok = .true.
      copies = 0
      deletes = 0
      dsum = 0
      zero = 0
      one = 1
      two = 2
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)

      call MPI_COMM_CREATE_KEYVAL(plus_extra, count_delete, ckey,
     &     one, ierr)
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_DUP_FN, count_delete,
     &     dkey, zero, ierr)
      call MPI_COMM_SPLIT(MPI_COMM_WORLD, 0, nprocs - rank, split,
     &     ierr)
      v = 10
      call MPI_COMM_SET_ATTR(split, ckey, v, ierr)
      v = 20
      call MPI_COMM_SET_ATTR(split, dkey, v, ierr)
      call MPI_COMM_IDUP(split, idup, req, ierr)
      call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
      call MPI_COMM_GET_ATTR(idup, ckey, v, flag, ierr)
      call check(rank, 'idup: callback gave 11',
     &   flag .and. v .eq. 11)
      call MPI_COMM_GET_ATTR(idup, dkey, v, flag, ierr)
      call check(rank, 'idup: MPI_COMM_DUP_FN copied 20',
     &   flag .and. v .eq. 20)
      dims(1) = nprocs
      periods(1) = .false.
      call MPI_CART_CREATE(idup, 1, dims, periods, .false., cart,
     &     ierr)
      call MPI_COMM_GET_ATTR(cart, ckey, v, flag, ierr)
      call check(rank, 'MPI_CART_CREATE copied nothing',
     &   .not. flag)
      v = 30
      call MPI_COMM_SET_ATTR(cart, ckey, v, ierr)
      call MPI_COMM_FREE(cart, ierr)
      call MPI_COMM_FREE(idup, ierr)
      call MPI_COMM_FREE(split, ierr)

      call MPI_TYPE_CREATE_KEYVAL(plus_extra, count_delete, tkey,
     &     two, ierr)
      call MPI_TYPE_VECTOR(2, 1, 2, MPI_INTEGER, vec, ierr)
      blocks(1) = 1
      blocks(2) = 1
      displs(1) = 0
      displs(2) = 8
      types(1) = MPI_INTEGER
      types(2) = MPI_DOUBLE_PRECISION
      call MPI_TYPE_CREATE_STRUCT(2, blocks, displs, types, struct,
     &     ierr)
      extent = 32
      call MPI_TYPE_CREATE_RESIZED(struct, zero, extent, resized,
     &     ierr)
      call MPI_TYPE_COMMIT(resized, ierr)
      v = 100
      call MPI_TYPE_SET_ATTR(vec, tkey, v, ierr)
      v = 200
      call MPI_TYPE_SET_ATTR(struct, tkey, v, ierr)
      v = 300
      call MPI_TYPE_SET_ATTR(resized, tkey, v, ierr)
      call MPI_TYPE_DUP(resized, rdup, ierr)
      call MPI_TYPE_GET_ATTR(rdup, tkey, v, flag, ierr)
      call check(rank, 'type dup: callback gave 302',
     &   flag .and. v .eq. 302)
      call MPI_TYPE_FREE(rdup, ierr)
      call MPI_TYPE_FREE(resized, ierr)
      call MPI_TYPE_FREE(struct, ierr)
      call MPI_TYPE_FREE(vec, ierr)

      call MPI_WIN_CREATE_KEYVAL(MPI_WIN_NULL_COPY_FN, count_delete,
     &     wkey, zero, ierr)
      wsize = 64
      call MPI_WIN_ALLOCATE(wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD,
     &     base, win, ierr)
      v = 7
      call MPI_WIN_SET_ATTR(win, wkey, v, ierr)
      call MPI_WIN_GET_ATTR(win, wkey, v, flag, ierr)
      call check(rank, 'window attribute',
     &   flag .and. v .eq. 7)
      call MPI_WIN_GET_ATTR(win, MPI_WIN_SIZE, v, flag, ierr)
      call check(rank, 'MPI_WIN_SIZE',
     &   flag .and. v .eq. 64)
      call MPI_WIN_FREE(win, ierr)

      call MPI_COMM_FREE_KEYVAL(ckey, ierr)
      call MPI_COMM_FREE_KEYVAL(dkey, ierr)
      call MPI_TYPE_FREE_KEYVAL(tkey, ierr)
      call MPI_WIN_FREE_KEYVAL(wkey, ierr)
!     Deleted: split 10 + 20, idup 11 + 20, cart 30, vec 100,
!     struct 200, resized 300, rdup 302, the window 7.
      if (rank .eq. 0) print '(a,i0,a,i0)',
     &   'mpif_constructors: copies ', copies, ', deletes ', deletes
      call check(rank, 'copies, deletes and deleted values right',
     &   copies .eq. 2 .and. deletes .eq. 10 .and.
     &   dsum .eq. 10 + 20 + 11 + 20 + 30 + 100 + 200 + 300 + 302 + 7)
      call MPI_FINALIZE(ierr)
      if (.not. allok) error stop 1
      end
