#pragma once
// Jellyfish's re-schedule of one pipeline (seed 000, §4): from what the frontends know of each
// client (SLO, frame rate, uplink, round trip, bytes per pixel of its images) and the pipeline's
// zoo of variants (one network at several input sizes), the per-client, per-variant compute
// budgets L_ij, the DNN each worker runs (Algorithm 2 over Algorithm 1), and where each client's
// requests go with the image size to tell it. Pure: the controller and the benchmark run it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "scheduling/policies/jellyfish/mapping.hpp"

namespace sloserve::sched::jellyfish {

// One client as the frontends report it.
struct client_state {
  std::string id;
  double slo_ms = 0;
  double rate_hz = 0;
  double uplink_mbps = -1;  // < 0: not measured yet (its uploads then cost nothing)
  double rtt_ms = 0;
  double bytes_per_pixel = 0;  // of its images; 0: unknown (the plan's default then)
  double image_pixels = 0;     // the pixels of the images bytes_per_pixel was measured on; 0: any
  std::vector<std::pair<double, double>> image_bytes;  // (pixels, bytes) of sizes it sent lately
  // An uplink its uploads fell below only rarely lately (scheduler.jellyfish.uplink_quantile);
  // uploads are timed at it, so that a changeable link leaves room for its dips. < 0: uplink_mbps.
  double uplink_low_mbps = -1;
  // The share of the wait behind a running batch (l(b)) that lifts onto spare compute plan for
  // (plan_options::spare): 1 is the worst case; less where its pipeline's misses allow
  // (sched::dip_quantile::wait_share).
  double wait_share = 1;
  // The share of the configured headroom (plan_options::headroom) its pipeline's plan keeps: 1,
  // less where the pipeline's misses allow (sched::dip_quantile::headroom_share). A pipeline is
  // planned with the largest of its clients' (rounds::decide).
  double headroom_share = 1;
};

// One variant of the zoo: a model and the image size it takes.
struct variant {
  std::string model;
  int64_t height = 0, width = 0;
  double accuracy = 0;  // percent
  int max_batch = 1;
  std::function<double(int)> latency_ms;  // l(b)
};

struct plan_options {
  double overhead_ms = 5;         // per request, beyond upload and compute (frontend, hops, reply)
  double bytes_per_pixel = 0.25;  // for clients whose images were not seen yet (a JPEG's, roughly)
  // > 0: every budget is this share of the client's SLO, whatever its uplink (a scheduler that
  // leaves the network to the clients' own adaptation: the DA_bw baseline).
  double compute_share = 0;
  jellyfish::annealing annealing{};
  // After the mapping, each worker whose clients are all mapped is raised in place to the most
  // accurate variant at a batch that carries them and whose (1 + wait_share)·l(b) each one's
  // spare_budget_ms holds (l(1) on a worker of one client, whose frames do not wait behind each
  // other); then each mapped client (least accurate first) moves to the most accurate variant
  // whose worker has spare compute for it: such a batch, within its own spare budget too (a
  // worker no client is left on may run the most accurate variant that fits). Told that variant's size,
  // which its link may not carry yet, the client sends the largest size its link does carry, so
  // that as its link grows it sends more at once, where otherwise it would wait for a plan on the
  // grown estimate.
  bool spare = true;
  // > 0: clients send images of this side (square) whatever they are told (DA_off): every
  // variant's upload is timed at that size, and spare compute lifts no one.
  int client_side = 0;
  // The lift onto spare compute leaves room for the uplink to fall by this share before the
  // estimate sees it (a step down of a changeable link): each client's spare budget times its
  // uploads at (1 - lift_margin) of the uplink at least. 0: at the uplink's dips alone.
  double lift_margin = 0;
  // The share of each worker's throughput t(b) = b / l(b) that Algorithm 1 and the lift leave
  // unplanned. 0: planned full, as printed; the 2·l(b) rule lets a frame wait out one batch,
  // which holds while each worker runs at its planned batch (rounds::run_on). More where frames
  // come more bunched than their clients' rates say.
  double headroom = 0;
};

// What an image of `v`'s size from client `c` weighs, in bytes: what the client's images of the
// nearest size it sent weighed (exact when it sent v's size), else its bytes per pixel measured
// at `image_pixels`; carried to v's pixels as JPEG sizes grow, as pixels^0.9 (larger images
// compress better: 128² to 608² frames grow 17x for 22.6x the pixels).
double input_bytes(const client_state& c, const variant& v, const plan_options& o);
// L_ij = SLO_i - (size_j / W_i + RTT_i) - overheads, clamped at 0; 0 also when the uplink cannot
// carry size_j at the client's rate (W_i / size_j <= rate_i). The upload is timed at the lower of
// W_i and uplink_low_mbps.
double budget_ms(const client_state& c, const variant& v, const plan_options& o);
// The compute budget that holds whatever size client `c` sends, up to any its link carries at its
// frame rate: such a size uploads within one frame interval at the client's own estimate, and
// W_i / uplink_low_mbps intervals at the dips its link has had (and 1 / (1 - lift_margin) at
// least). 0 when its uplink is not measured.
double spare_budget_ms(const client_state& c, const plan_options& o);

// Where one client goes.
struct assignment {
  size_t worker = 0;
  size_t variant = 0;  // the worker's
  double budget_ms = 0;
  bool mapped = false;  // Algorithm 1 placed it; false: the fastest worker takes it, best effort
};

struct plan {
  std::vector<size_t> variants;     // per worker, an index into the zoo
  std::vector<int> batch;           // per worker: the batch its clients allow (1 when none)
  std::vector<assignment> clients;  // per client, in the order given
  jellyfish::quality quality;
};

// The zoo as Jellyfish's latency estimator keeps it (seed 000, §3 and §7.1): sorted ascending
// (accuracy, then l(1)); a variant that another is at least as accurate and as fast as (l(1)),
// one of them strictly, is dropped; and each l(b) is raised to the largest l(b) of the smaller
// variants (p99 profiles need not grow with size; the algorithms assume they do).
std::vector<variant> clean_zoo(std::vector<variant> zoo);

// Jellyfish's DNN update (§4.4): the workers that ran `previous` take the new selection so that
// what each runs moves least: the old and the new sorted by size, descending, matched element by
// element (the workers' variants, batches and clients move together).
void match_to_previous(plan& p, const std::vector<size_t>& previous);

// The zoo is clean (clean_zoo). `previous`: per worker, the selection before (resized to
// `workers`; empty: every worker starts on the smallest variant, Jellyfish's bootstrap set).
// With no clients every worker keeps its variant. The selection goes to the workers by
// match_to_previous.
plan plan_jellyfish(const std::vector<variant>& zoo, const std::vector<client_state>& clients, size_t workers,
                    std::vector<size_t> previous, const plan_options& o = {});

}  // namespace sloserve::sched::jellyfish
