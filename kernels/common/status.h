// The per-request status bits the kernels write into request_status: the values of the public
// DDS_REQ_* (include/dds/dds.h), which the kernels do not include; src/api.cpp checks each pair
// with a static_assert. Host and device code.
#ifndef DDS_KERNELS_COMMON_STATUS_H_
#define DDS_KERNELS_COMMON_STATUS_H_

#include <stdint.h>

namespace dds {

constexpr int32_t kReqBadTemperature = 1;  // NaN, negative or infinite: 1.0 used
constexpr int32_t kReqBadGuidance = 2;     // NaN or infinite guidance scale: 0 used
constexpr int32_t kReqBadTopK = 4;         // negative: 0 (off) used
constexpr int32_t kReqBadTopP = 8;         // NaN: 1 (off) used
constexpr int32_t kReqBadMinP = 16;        // NaN or negative: 0 (off) used
constexpr int32_t kReqBadUncondRows = 32;  // uncond rows out of range: no guidance
constexpr int32_t kReqEmptyRow = 64;       // a row had no finite, unbanned, allowed column
constexpr int32_t kReqBadSlot = 128;       // stash: slot out of range, request skipped
constexpr int32_t kReqBadPolicy = 256;     // reveal: unknown policy, TOP_N used
constexpr int32_t kReqBadPosition = 512;   // reveal: a position outside the canvas
constexpr int32_t kReqBadRowOffsets = 2048;  // row offsets reversed / out of range: no rows
constexpr int32_t kReqBadDraftCount = 4096;  // verify: draft count outside [0, n]: clamped
constexpr int32_t kReqBadEntropyBound = 8192;  // reveal ENTROPY_BOUND: NaN or negative, 0 used
constexpr int32_t kReqBadTokenId = 16384;      // stash / verify: an input token id outside [0, V)
constexpr int32_t kReqBadNumTokenIds = 32768;  // stash: num_token_ids outside [0, num_top]
constexpr int32_t kReqBadRevealParam = 65536;  // reveal: NaN threshold, bad factor / position T

}  // namespace dds

#endif  // DDS_KERNELS_COMMON_STATUS_H_
