// Symbols that ml-metadata and TFDV wheels (built for glibc >= 2.39, GCC 13+)
// expect from newer system libraries than Debian 12 / Ubuntu 22.04 ship.
// scripts/glibc_compat.py compiles this into libtfxp_glibc_shim.so, adds it
// as a NEEDED library of each affected extension and unversions the symbols,
// so the dynamic linker resolves them here instead of failing at import.
#include <cstdlib>
#include <cxxabi.h>
#include <exception>
#include <ios>

extern "C" {

// glibc 2.38 added C23 variants (they also accept a "0b" prefix); the
// extensions only parse decimal numbers, so the classic functions suffice.
long __isoc23_strtol(const char* s, char** end, int base) {
  return std::strtol(s, end, base);
}
long long __isoc23_strtoll(const char* s, char** end, int base) {
  return std::strtoll(s, end, base);
}
unsigned long __isoc23_strtoul(const char* s, char** end, int base) {
  return std::strtoul(s, end, base);
}
unsigned long long __isoc23_strtoull(const char* s, char** end, int base) {
  return std::strtoull(s, end, base);
}

// GCC 13's libsupc++ calls this when an exception escapes a noexcept region.
void __cxa_call_terminate(void* exception) noexcept {
  if (exception != nullptr) {
    __cxxabiv1::__cxa_begin_catch(exception);
  }
  std::terminate();
}

}  // extern "C"

namespace std {
// GCC 13 moved iostream initialisation behind this call (GLIBCXX_3.4.32).
void ios_base_library_init() { static ios_base::Init init; }
}  // namespace std
