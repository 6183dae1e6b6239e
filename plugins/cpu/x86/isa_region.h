// Opens and closes a region of functions compiled for an instruction set beyond the baseline
// (AVX2, AVX-512 and its extensions), beside baseline code in the same file that must still run
// where those are absent: the dispatchers call into a region only when cpuid reports its ISA.
// GCC spells this `#pragma GCC target`; clang ignores that pragma and instead takes the target
// attribute applied to every function declared in the region. The same source then builds the
// same per-function ISA split with either compiler (clang builds the sanitizer tiers), so a
// clang build runs on any x86-64 CPU and takes the AVX-512 paths only where they exist.
// Include it before the region; the region itself includes only this project's own headers and
// .inc files, never a system header, whose functions would take the region's ISA.
#pragma once

#define EDGERT_ISA_PRAGMA(text) _Pragma(#text)

#if defined(__clang__)
#define EDGERT_ISA_REGION_BEGIN(isa) \
  EDGERT_ISA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define EDGERT_ISA_REGION_END EDGERT_ISA_PRAGMA(clang attribute pop)
#else
#define EDGERT_ISA_REGION_BEGIN(isa) EDGERT_ISA_PRAGMA(GCC push_options) EDGERT_ISA_PRAGMA(GCC target(isa))
#define EDGERT_ISA_REGION_END EDGERT_ISA_PRAGMA(GCC pop_options)
#endif
