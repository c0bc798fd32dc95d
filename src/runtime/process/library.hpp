// What the runtime asks the MPI library directly, through PMPI: whether a handle names a live
// object, an attribute as the library holds it, handle conversions, and the Fortran entry points
// a Fortran program loads. Not a public header.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "attrcheck/engine.hpp"
#include "runtime/process/abi.hpp"

namespace attrcheck::rt {

// Whether the library has a live object of `kind` with handle `h`, asked without handing it a
// handle that may name a freed object (library.cpp: how, per library). False when it cannot tell.
bool library_has_live(ObjectKind kind, Handle h) noexcept;
// Asks the library (PMPI) whether `h` carries attribute `key` (the user's keyval number).
// `lang`: how the value was set (a Fortran-set value is read as Fortran reads it).
bool library_attr(ObjectKind kind, Handle h, int key, std::uint64_t* value, Binding lang = Binding::C) noexcept;
Fint fortran_handle(ObjectKind kind, Handle h) noexcept;
Handle c_handle(ObjectKind kind, Fint f) noexcept;  // the library's f2c (a live object's handle, or null)

// Open MPI's Fortran entry points (pmpi_comm_set_attr_ ...) live in libmpi_mpifh, which only
// Fortran programs load: the Fortran wrappers look them up instead of linking. nullptr if absent.
void* fortran_pmpi(const char* name) noexcept;

}  // namespace attrcheck::rt
