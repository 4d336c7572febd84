#pragma once
// Jellyfish's client-to-DNN mapping (seed 000, Algorithm 1). Clients each send `rate` requests/s
// (whole numbers, frames per second) with a compute budget per DNN (their SLO less the time their
// input takes to upload at that DNN's input size). A DNN instance at batch b serves a client whose
// budget holds 2·l(b) (a request may wait out one batch, then run in the next), and carries
// t(b) = b / l(b) requests/s.
//
// find_optimal_clients: for one DNN, the subset of clients with the largest aggregate rate it can
// serve at some batch, by one DP over every batch at once: clients in descending budget, columns
// the aggregate rate in steps of h = gcd of the rates, row i computed up to what the DNN carries
// at the largest batch client i's budget allows (a 0-1 knapsack whose capacity shrinks row by
// row). Exact: the test checks it against every subset.
//
// map_clients: DNNs in descending accuracy, each takes the best subset of the clients left.

#include <cstddef>
#include <functional>
#include <vector>

namespace sloserve::sched {

struct jf_client {
  int rate = 0;                   // requests/s, > 0
  std::vector<double> budget_ms;  // per DNN: its compute budget there (0: it cannot use that DNN)
};

struct jf_dnn {
  double accuracy = 0;  // for the order of map_clients
  int max_batch = 1;
  std::function<double(int)> latency_ms;  // l(b), increasing in b
};

struct jf_choice {
  std::vector<size_t> clients;  // indices into the clients given, ascending
  int rate = 0;                 // their aggregate rate
  int batch = 0;                // the largest batch every one of them allows (0: none chosen)
};

// The clients (of `candidates`, indices into `clients`) that DNN `d` (index into their budgets)
// serves with the largest aggregate rate.
jf_choice find_optimal_clients(const jf_dnn& dnn, size_t d, const std::vector<jf_client>& clients,
                               const std::vector<size_t>& candidates);

// Per DNN (in the order given), the clients mapped to it; clients no DNN can take are in none.
std::vector<jf_choice> map_clients(const std::vector<jf_dnn>& dnns, const std::vector<jf_client>& clients);

// What one instance of `dnn` carries at the largest batch whose 2·l(b) fits `budget_ms`
// (the best b / l(b) over the batches that fit), and that batch; {0, 0} when none fits.
std::pair<double, int> jf_capacity(const jf_dnn& dnn, double budget_ms);

}  // namespace sloserve::sched
