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
#include <cstdint>
#include <functional>
#include <vector>

namespace sloserve::sched::jellyfish {

struct client {
  int rate = 0;                   // requests/s, > 0
  std::vector<double> budget_ms;  // per DNN: its compute budget there (0: it cannot use that DNN)
};

struct dnn {
  double accuracy = 0;  // for the order of map_clients
  int max_batch = 1;
  std::function<double(int)> latency_ms;  // l(b), increasing in b
  // The share of t(b) an instance is planned to carry: 1 (as printed) plans it full; less leaves
  // headroom (plan_options::headroom).
  double load = 1;
};

struct choice {
  std::vector<size_t> clients;  // indices into the clients given, ascending
  int rate = 0;                 // their aggregate rate
  int batch = 0;                // the largest batch every one of them allows (0: none chosen)
};

// The clients (of `candidates`, indices into `clients`) that DNN `d` (index into their budgets)
// serves with the largest aggregate rate.
choice find_optimal_clients(const dnn& dnn, size_t d, const std::vector<client>& clients,
                            const std::vector<size_t>& candidates);

// Per DNN (in the order given), the clients mapped to it; clients no DNN can take are in none.
// `column[d]`: which of a client's budgets DNN d uses (empty: d itself), so that several
// instances of one DNN of a zoo share its budgets.
std::vector<choice> map_clients(const std::vector<dnn>& dnns, const std::vector<client>& clients,
                                const std::vector<size_t>& column = {});

// A mapping's quality: O1, the fraction of clients mapped, and O2, the rate-weighted accuracy
// (a fraction; unmapped clients count 0).
struct quality {
  double mapped = 0;
  double accuracy = 0;
};
quality quality_of(const std::vector<choice>& mapping, const std::vector<dnn>& dnns,
                   const std::vector<client>& clients);

// Algorithm 2: which DNN of the zoo each worker runs. `zoo` ascends in size (and accuracy);
// `start`: per worker, an index into it (the previous selection, or the smallest). Simulated
// annealing: DEGRADE (each worker's DNN one step smaller or kept) until every client is mapped,
// then UPGRADE (one step smaller, kept or larger) for accuracy without mapping fewer clients; a
// worse state is accepted with probability exp(-|diff| / T), T from t0 down to t_min by `cool`.
struct annealing {
  double t0 = 0.0125, t_min = 0.0005, cool = 0.99;
  uint64_t seed = 1;
};
struct selection {
  std::vector<size_t> dnns;     // per worker, an index into the zoo
  std::vector<choice> mapping;  // per worker
  jellyfish::quality quality;
};
selection select_dnns(const std::vector<dnn>& zoo, const std::vector<client>& clients, std::vector<size_t> start,
                      const annealing& a = {});
// The selection's mapping and quality (Algorithm 1 on those DNNs).
selection evaluate_selection(const std::vector<dnn>& zoo, const std::vector<client>& clients, std::vector<size_t> dnns);

// What one instance of `dnn` carries at the largest batch whose 2·l(b) fits `budget_ms`
// (the best b / l(b) over the batches that fit, times its `load`), and that batch; {0, 0} when
// none fits.
std::pair<double, int> capacity(const dnn& dnn, double budget_ms);

}  // namespace sloserve::sched::jellyfish
