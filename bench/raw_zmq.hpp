#pragma once
// The raw ZeroMQ baseline of bench/overhead: the same frames through a relay process and an echo
// process, ROUTER/DEALER, each single-threaded.

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "pipelines/tensor.hpp"

namespace sloserve::raw_zmq {

// A free TCP port on loopback, and its endpoint.
int free_port();
std::string ep(int port);

// Answers every request on `port`. With `reply` set, with a client reply carrying one tensor of
// that shape (what a model's output would be), else with the request frame itself.
[[noreturn]] void run_echo(int port, std::optional<tensor_spec> reply);
// Forwards between clients on `front` and the echo on `back`.
[[noreturn]] void run_relay(int front, int back);
// Runs `f` in a child process; its pid.
pid_t fork_fn(std::function<void()> f);

}  // namespace sloserve::raw_zmq
