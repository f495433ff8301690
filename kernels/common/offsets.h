// The row_offsets rule of docs/sampling.md §1 ("Device-resident values"), in one place for the
// CUDA kernels and the CPU backend (host and device code).
//
// Row i belongs to request find(i), the result of one fixed binary search over the offsets (the
// last r in [0, n) with offs[r] <= i, for a valid array), when that request's offsets are good:
//   0 <= offs[r] <= offs[r + 1] <= num_rows, offs[0] == 0 (r = 0), offs[n] == num_rows (r = n-1).
// A request whose offsets are not good is flagged DDS_REQ_BAD_ROW_OFFSETS and owns no rows; the
// rows the search gives it are "orphan" rows (dds_sample still writes them, see the docs).
// Properties (docs/sampling.md proves them): a valid array (offs[0] = 0, non-decreasing,
// offs[n] = num_rows) flags no request and gives every request exactly [offs[r], offs[r+1]);
// an invalid one flags at least one request; every row has exactly one request find(i), so it is
// owned by at most one request; for a good request, find(i) == r implies
// offs[r] <= i < offs[r+1] (so a row kernel needs no further check); find is non-decreasing in
// i for ANY array (two rows' searches take the same probes until they part, the smaller row to
// the left), so the rows find() gives one request form an interval (rows_of).
#ifndef DDS_KERNELS_COMMON_OFFSETS_H_
#define DDS_KERNELS_COMMON_OFFSETS_H_

#include <stdint.h>

#include "rng.h"  // DDS_HD
#include "status.h"

namespace dds {
namespace offsets {

// The request of row i: the binary search every kernel uses (sample/row.cuh find_request,
// shard/row.h row_request hold the same loop). offs == nullptr: one row per request.
DDS_HD int32_t find(const int32_t* offs, int32_t n, int32_t i) {
  if (offs == nullptr) return i;
  int32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) >> 1;
    if (offs[mid] <= i) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Whether request r's offsets b = offs[r], e = offs[r + 1] are good (see above).
DDS_HD bool good(int32_t b, int32_t e, int32_t r, int32_t n, int32_t num_rows) {
  return b >= 0 && b <= e && e <= num_rows && (r != 0 || b == 0) && (r != n - 1 || e == num_rows);
}

// The rows find() gives request r: [*lo, *hi) (empty: *lo == *hi). For a good request these are
// the rows it owns (a sub-interval of [offs[r], offs[r+1]), all of it for a valid array); for a
// flagged one, its orphan rows. Cost: two searches for a good request whose whole range is its
// own (every request of a valid array), else two binary searches over rows of a search each.
DDS_HD void rows_of(const int32_t* offs, int32_t n, int32_t num_rows, int32_t r, int32_t* lo,
                    int32_t* hi) {
  if (offs == nullptr) {
    *lo = r < num_rows ? r : num_rows;
    *hi = r < num_rows ? r + 1 : num_rows;
    return;
  }
  const int32_t b = offs[r], e = offs[r + 1];
  if (good(b, e, r, n, num_rows)) {
    if (b == e) {
      *lo = *hi = b;
      return;
    }
    if (find(offs, n, b) == r && find(offs, n, e - 1) == r) {
      *lo = b;
      *hi = e;
      return;
    }
  }
  // First row whose search gives >= r, then the first giving > r (find is non-decreasing).
  int32_t a = 0, z = num_rows;
  while (a < z) {
    const int32_t m = a + ((z - a) >> 1);
    if (find(offs, n, m) < r) a = m + 1;
    else z = m;
  }
  *lo = a;
  z = num_rows;
  while (a < z) {
    const int32_t m = a + ((z - a) >> 1);
    if (find(offs, n, m) <= r) a = m + 1;
    else z = m;
  }
  *hi = a;
}

// A verify draft count outside [0, n] is clamped into it and flagged DDS_REQ_BAD_DRAFT_COUNT.
DDS_HD int32_t draft_count(int32_t c, int32_t n, int32_t* status) {
  if (c < 0 || c > n) {
    *status |= kReqBadDraftCount;
    c = c < 0 ? 0 : n;
  }
  return c;
}

}  // namespace offsets
}  // namespace dds

#endif  // DDS_KERNELS_COMMON_OFFSETS_H_
