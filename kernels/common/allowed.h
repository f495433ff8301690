// Allowed-token bitmasks (docs/sampling.md §2): 32 token ids per int32 word, token t allowed when
// bit (t & 31) of word (t >> 5) of its request's mask is set (the layout grammar engines such as
// xgrammar produce). A null mask row allows every token. Host and device code: the CPU backend
// and every kernel test a column with the same function, where they apply the banned token.
#ifndef DDS_KERNELS_COMMON_ALLOWED_H_
#define DDS_KERNELS_COMMON_ALLOWED_H_

#include <stdint.h>

#include "rng.h"  // DDS_HD

namespace dds {

// Request r's mask row, or null when the call has no masks (every token allowed).
DDS_HD const int32_t* allowed_row(const int32_t* masks, int64_t stride, int32_t r) {
  return masks ? masks + (int64_t)r * stride : nullptr;
}

// Whether column `col` (0 <= col < V) is allowed by `mask_row` (null: every column).
DDS_HD bool allowed(const int32_t* mask_row, int col) {
  return mask_row == nullptr || ((((uint32_t)mask_row[col >> 5]) >> (col & 31)) & 1u) != 0;
}

// Words of a mask row covering V columns: ceil(V / 32).
DDS_HD int64_t allowed_words(int32_t V) { return ((int64_t)V + 31) / 32; }

}  // namespace dds

#endif  // DDS_KERNELS_COMMON_ALLOWED_H_
