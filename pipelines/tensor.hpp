#pragma once
// Tensors as they travel between client, frontend and worker: dtype, shape, raw bytes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipelines/bytes.hpp"
#include "pipelines/expected.hpp"

namespace sloserve {

// Element types; the wire's DType (messages/sloserve.capnp) numbers them alike.
enum class dtype : uint8_t {
  float32,
  float16,
  int64,
  int32,
  uint8,
  float64,
  uint64,
  int8,
  int16,
  uint16,
  uint32,
  boolean,
  // Strings of bytes, of any length: each element is a 4-byte little-endian length and that many
  // bytes (KServe v2's binary form of BYTES).
  bytes
};
inline constexpr dtype last_dtype = dtype::bytes;
inline constexpr dtype all_dtypes[] = {dtype::float32, dtype::float16, dtype::int64, dtype::int32, dtype::uint8,
                                       dtype::float64, dtype::uint64,  dtype::int8,  dtype::int16, dtype::uint16,
                                       dtype::uint32,  dtype::boolean, dtype::bytes};

// Bytes per element of `t`; 0 for bytes, whose elements vary.
size_t dtype_size(dtype t);
std::string_view dtype_name(dtype t);
std::optional<dtype> parse_dtype(std::string_view name);

// Declared per-request tensor: dtype and shape without the batch dimension.
struct tensor_spec {
  dtype type = dtype::float32;
  std::vector<int64_t> shape;

  // Element count; nullopt when a dimension is negative or the product overflows.
  std::optional<uint64_t> elements() const;
  // Bytes of the data; nullopt also for bytes, whose size depends on the elements.
  std::optional<uint64_t> byte_size() const;
  // Bytes of the data when every element is zero (for bytes: empty strings).
  std::optional<uint64_t> zero_size() const;
  std::string to_string() const;  // e.g. "float32[3,224,224]"
};

struct tensor {
  std::string name;
  dtype type = dtype::float32;
  std::vector<int64_t> shape;
  bytes data;  // little-endian elements, row-major; shared by reference, never copied in flight

  tensor_spec spec() const { return {type, shape}; }
};

// Where a tensor's bytes lie when a client on the node's host passes them in shared memory
// (Triton's shared-memory extension): `byte_size` bytes at `offset` into its registered region
// `region` (ingress/shm_regions.hpp).
struct shm_ref {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  bool operator==(const shm_ref&) const = default;
};

// Empty string when `t` matches `spec` exactly; otherwise why it does not.
status check_tensor(const tensor& t, const tensor_spec& spec);

// Empty string when data size equals shape x dtype; otherwise why not.
status check_tensor_bytes(const tensor& t);

// Where `count` bytes elements from offset `from` of `data` end; nullopt when they overrun it.
std::optional<size_t> bytes_elements_end(std::string_view data, size_t from, uint64_t count);
// The bytes elements of `data` (views into it), or nullopt when it is not `count` whole elements.
std::optional<std::vector<std::string_view>> bytes_elements(std::string_view data, uint64_t count);
// `items` in the bytes form.
std::string bytes_data(const std::vector<std::string>& items);

// Number of rows (the first dimension); 1 for a scalar.
int64_t row_count(const tensor& t);
// Row i of `t`: shape without the first dimension; shares the bytes of `t`.
tensor row_of(const tensor& t, int64_t i);

// A tensor of `spec` filled deterministically from `seed` (splitmix64 stream).
tensor make_tensor(const tensor_spec& spec, uint64_t seed, std::string name = {});

// A 64-bit hash of the bytes (four-lane FNV-1a over words); used to derive deterministic outputs from inputs.
uint64_t fingerprint(std::string_view bytes);
// The same for up to 64 KB; beyond, 64 evenly spread blocks of 1 KB and the size: outputs that
// emulated devices derive from inputs stay deterministic without a pass over every byte of an image.
uint64_t sample_fingerprint(std::string_view bytes);

}  // namespace sloserve
