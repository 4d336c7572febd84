#pragma once
// `sloserve load --clients N`: N video clients of their own (ClientRequest.client), each sending
// frames at its frame rate under its SLO over an emulated uplink: a frame waits for the frames
// before it to cross the link, crosses it at the bandwidth its trace gives each second it spans, and
// reaches the frontend half a round trip later; it carries its capture time as its send time, so
// the SLO counts the upload. Data adaptation: each client sends JPEG frames at one of the image
// sizes its pipeline's variants take, as the replies advise (jellyfish), the largest its uplink
// carries at its frame rate (bandwidth), or always the middle size (off). A client knows its
// uplink only from the transfers it finished (the harmonic mean of the last second, as the
// frontend estimates it, or the latest transfer's rate when that is lower), and sends the
// smallest size until it has one, and whenever a frame finds the link still busy with earlier ones.
// A frame that could not cross in time is skipped (`skip_hopeless`), and counts as missed; a
// jellyfish client also sends no size that it knows would cross too late.

#include <map>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "loadgen/options.hpp"
#include "loadgen/tally.hpp"

namespace sloserve {

// How a client chooses the size it sends: as the replies advise (Jellyfish's); the largest its
// uplink carries (DA_bw); one fixed size (DA_off); the largest its uplink carries that uploads
// within `network_share` of its SLO (DA_slo: SLO-aware, the rest being the server's budget).
enum class data_adaptation { jellyfish, bandwidth, off, slo };

struct image_size {
  int height = 0, width = 0;
  bool operator==(const image_size&) const = default;
};

struct client_options {
  int clients = 0;
  std::vector<double> slo_ms;                  // per client, cycled; empty: the pipeline's
  std::vector<double> fps;                     // per client, cycled
  std::vector<double> join_s;                  // per client, cycled: seconds into the run it starts; empty: 0
  std::vector<std::vector<double>> bandwidth;  // per-second Mbps traces, cycled; empty: unlimited
  double rtt_ms = 10;
  data_adaptation adaptation = data_adaptation::jellyfish;
  // Skip a frame that, at the uplink the client knows of and behind what its send queue still
  // holds, would cross too late to be answered within its SLO (the server's part taken as the
  // least it has been lately): as a camera client does, rather than delay the frames after it.
  // Skipped frames count as missed.
  bool skip_hopeless = true;
  std::vector<image_size> sizes;  // ascending in pixels: what the pipeline's variants take
  image_size fixed{};             // adaptation off: the size sent (default: the middle one)
  double network_share = 0.5;     // adaptation slo: the share of its SLO a client gives its upload
  // For the summary's accuracy: the size each model takes (an index into `sizes`), and the
  // accuracy of the best variant at each size. An answer is as accurate as the variant of the
  // smaller of the size sent and the size of the model that ran (an image scaled up gains
  // nothing).
  std::map<std::string, size_t> model_size;
  std::vector<double> size_accuracy;
};

// The image sizes (and accuracies) of the variants of `p`'s first stage, ascending; the middle
// one for adaptation off. An error when a variant takes no images.
status set_image_sizes(const cluster_config& cfg, const pipeline& p, client_options& co);

// Runs the clients against `o.address` for `o.duration_s` (after `o.warmup_s`) and summarises
// them: the load summary plus `clients` (per client: sent, ok within its SLO, miss rate, mean
// accuracy of its answers, sizes sent) and `accuracy` (of answers within their SLO).
expected<load_summary> run_clients(const load_options& o, const client_options& c);

// A synthetic camera frame of h x w as JPEG (quality 80): shading, flat objects and noise, at
// roughly the bytes per pixel of real video frames. The same seed draws the same scene.
std::string camera_frame_jpeg(int h, int w, uint64_t seed);

// Of frames of `bytes`, smallest first, the index of the largest that `mbps` carries `fps` times a
// second; 0 when none does.
size_t largest_carried(const std::vector<size_t>& bytes, double mbps, double fps);
// Of frames of `bytes`, smallest first, up to index `carried`, the largest that uploads within
// `budget_ms` at `mbps`; 0 when none does.
size_t within_share(const std::vector<size_t>& bytes, size_t carried, double mbps, double budget_ms);

// What a Jellyfish client sends next, as an index into `bytes` (smallest first): the size the
// replies advised (`advised`; bytes.size(): none yet), or `carried` when that is smaller; then
// smaller while its upload at `mbps` would end too late to be answered within `slo_ms` (the
// server's part taking `server_ms`). The smallest size is sent whatever it takes.
size_t jellyfish_size(const std::vector<size_t>& bytes, size_t advised, size_t carried, double mbps, double server_ms,
                      double slo_ms);

}  // namespace sloserve
