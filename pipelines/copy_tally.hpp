#pragma once
// Bytes of tensors copied in this process, counted where a request's payload can be copied on
// its way from the socket it arrives on to a device's batch: bytes::copy_of, a tensor resized, a
// frame built around tensors (their bytes flattened into it), a frame realigned before it is
// read. Tests read the total before and after a request to count the copies each path makes.

#include <cstddef>
#include <cstdint>

namespace sloserve::copy_tally {

void add(size_t bytes);
uint64_t total();

}  // namespace sloserve::copy_tally
