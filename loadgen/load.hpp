#pragma once
// The built-in load generator: open loop (constant, Poisson, gamma, or a per-second rate trace)
// or closed loop, over one or more ZeroMQ DEALERs (lanes), with exact accounting of every
// request. Its parts: arrivals (when to send), socket (one connection), tally (what came back).

#include <string>
#include <vector>

#include "loadgen/arrivals.hpp"
#include "loadgen/options.hpp"
#include "loadgen/tally.hpp"

namespace sloserve {

// Encoded image bytes as a request input: uint8[N].
tensor encoded_image(std::string data);

// JPEG files as request inputs (uint8[N] each): `path` is one file, or a folder whose *.jpg and
// *.jpeg files are read in name order.
expected<std::vector<tensor>> read_images(const std::string& path);

// `count` random raw images of `hxw` ("480x640") as request inputs, uint8[H, W, 3] each, from `seed`.
expected<std::vector<tensor>> random_images(const std::string& hxw, uint64_t seed, int count = 8);

// Sending threads `run_load` uses when `threads` is 0.
size_t default_lanes(const load_options& o);

// Runs the load and summarises it; an error when it could not start.
expected<load_summary> run_load(const load_options& o);

}  // namespace sloserve
