// What the library's native ABI and the MPI standard ABI (libmpi_abi, MPI 5.0) spell differently,
// under one name for the runtime. The ABI build (ATTRCHECK_STANDARD_ABI, libattrcheck_abi.so) is
// compiled against the standard mpi.h, which has no MPI_Fint, no c2f / f2c (MPI_<T>_toint and
// MPI_<T>_fromint replace them) and, in Open MPI's copy, none of the deprecated MPI-1 names.
#pragma once

#include <mpi.h>

namespace attrcheck::rt {

#if defined(ATTRCHECK_STANDARD_ABI)
// The standard ABI has no Fortran binding of its own (neither library ships one): the Fortran
// paths of the runtime are compiled but never entered, and a handle's integer is MPI_<T>_toint's.
using Fint = int;
inline constexpr bool kStandardAbi = true;
#else
using Fint = MPI_Fint;
inline constexpr bool kStandardAbi = false;
#endif

}  // namespace attrcheck::rt

#if defined(ATTRCHECK_STANDARD_ABI)
// The standard fixes every predefined callback's value: the null ones are 0x0 and the dup ones
// 0x1, the deprecated MPI-1 names included (MPI 5.0, the ABI's constants). Open MPI's mpi.h leaves
// the MPI-1 names out; a program compiled against MPICH's passes the same values.
#ifndef MPI_NULL_COPY_FN
#define MPI_NULL_COPY_FN ((MPI_Copy_function*)0x0)
#define MPI_DUP_FN ((MPI_Copy_function*)0x1)
#define MPI_NULL_DELETE_FN ((MPI_Delete_function*)0x0)
#endif
#endif
