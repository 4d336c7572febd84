#pragma once
// Image inputs of models with `preprocess:`: JPEG decoding (libjpeg-turbo) and the conversion of
// a request's image into the model's float32[3, H, W] input row. The CPU path; cuda devices
// decode here too and resize and normalize on the GPU (gpu/preprocess.cu).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpu/preprocess.hpp"
#include "pipelines/model.hpp"

namespace sloserve {

// The size of the JPEG image in `data` from its header alone; an error when it is no JPEG, is
// damaged before its frame header, or is larger than max_image_side / max_image_pixels.
status jpeg_size(const uint8_t* data, size_t n, int& h, int& w);

// Pixels of an input: a raw uint8[h, w, 3] image's, a JPEG's (from its header), or the last two
// dimensions of a tensor; 0 when it has none.
int64_t image_pixels_of(const tensor& t);

// Decodes JPEG bytes to RGB, h x w x 3.
status decode_jpeg(const uint8_t* data, size_t n, std::vector<uint8_t>& rgb, int& h, int& w);

// Checks a request's input for model `m` as a device will take it: the declared tensor, or (for
// a model with `preprocess:`) a raw image or a JPEG whose header is sound and within the limits.
status check_input(const tensor& t, const model_spec& m);

// The preprocessing of `m` for its declared input size.
preprocess_spec preprocess_of(const model_spec& m);

// Writes the input row of `t` (of `form` for model `m`) at `row` as float32[3, H, W] of m's
// input: copied when it is the declared tensor, else decoded, resized and normalized. An error
// for a bad image.
status input_row(const tensor& t, input_form form, const model_spec& m, float* row);

// A request's image as RGB h x w x 3 bytes: the raw tensor itself (no copy; `scratch` unused),
// or the JPEG decoded into `scratch`.
status image_pixels(const tensor& t, input_form form, std::vector<uint8_t>& scratch, const uint8_t*& rgb, int& h,
                    int& w);

// Runs f(i) for every i in [0, n), on up to `threads` threads at once (the caller's among them),
// each taking a contiguous run of rows; returns when all are done. A batch's rows are independent
// (each request's tensor copied, or its image decoded and resized), so a device stacks them so.
void for_each_row(size_t n, int threads, const std::function<void(size_t)>& f);

}  // namespace sloserve
