// `sloserve profile`: measure a model's l(b) on a device and write it in the cluster file's
// profile format, with linear and quadratic fits.

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "apps/commands.hpp"
#include "config/knob_option.hpp"
#include "gpu/profiler.hpp"
#include "loadgen/load.hpp"
#include "pipelines/write_file.hpp"
#include "scheduling/profile_fit.hpp"

namespace sloserve {

void add_profile_command(CLI::App& app, int& rc) {
  struct opts {
    std::string config, model, out, images, image_size;
    device_kind device = device_kind::cpu;
    CLI::Option* device_given = nullptr;
    std::vector<int> batches;
    int threads = 1;
    profile_options po;
  };
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand("profile", "Measure a model's batch latencies and write its profile");
  cmd->add_option("-c,--config", o->config, "cluster file")->required();
  cmd->add_option("--model", o->model, "model to profile")->required();
  cmd->add_option("--batches", o->batches, "batch sizes (default 1, 2, 4, ... up to max_batch)")->delimiter(',');
  o->device_given = add_knob_option(cmd, "--device", o->device, "device kind (default: cpu when the model has a path)");
  cmd->add_option("--threads", o->threads, "intra-op threads (cpu)")->capture_default_str();
  cmd->add_option("--runs", o->po.min_runs, "at least this many runs per batch size and pass")->capture_default_str();
  cmd->add_option("--quantile", o->po.quantile, "plan with this quantile of the runs (outliers set aside)")
      ->check(CLI::Range(0.5, 0.999))
      ->capture_default_str();
  cmd->add_option("--passes", o->po.passes, "independent passes over all sizes (a third settles a disagreement)")
      ->check(CLI::Range(1, 10))
      ->capture_default_str();
  cmd->add_option("--seconds", o->po.max_seconds, "at most this long per batch size once --runs are done")
      ->capture_default_str();
  cmd->add_option("--images", o->images,
                  "a model with preprocess: run batches of these JPEG files (a file, or a folder of *.jpg), so that "
                  "decoding counts in the profile");
  cmd->add_option("--image-size", o->image_size,
                  "a model with preprocess: run batches of random uint8 HxW RGB images (e.g. 480x640)");
  cmd->add_option("--out", o->out, "write the profile here (YAML, the models[].profile key)");
  cmd->callback([o, &rc] {
    auto cfg = load_config_or_report(o->config);
    if (!cfg) return void(rc = 2);
    auto* m = cfg->find_model(o->model);
    if (!m) {
      std::cerr << o->config << ": has no model '" << o->model << "'\n";
      return void(rc = 2);
    }
    if (!o->images.empty() || !o->image_size.empty()) {
      if (!m->preprocess) {
        std::cerr << "sloserve profile: model '" << m->name
                  << "' has no preprocess: it takes tensors, not images (--images, --image-size)\n";
        return void(rc = 2);
      }
      auto images = o->images.empty() ? random_images(o->image_size, 1) : read_images(o->images);
      if (!images) {
        std::cerr << "sloserve profile: " << images.error() << "\n";
        return void(rc = 2);
      }
      o->po.inputs = std::move(*images);
    }
    auto kind = o->device_given->count() ? o->device : m->path.empty() ? device_kind::emulated : device_kind::cpu;
    auto made = make_executor(kind, 1, o->threads);
    if (!made) {
      std::cerr << "sloserve profile: " << made.error() << "\n";
      return void(rc = 1);
    }
    auto ex = std::move(*made);
    o->po.batches = o->batches;
    o->po.max_runs = std::max(o->po.max_runs, o->po.min_runs);
    auto measured = profile_model(*ex, *m, o->po);
    if (!measured) {
      std::cerr << "sloserve profile: " << measured.error() << "\n";
      return void(rc = 1);
    }
    auto& points = *measured;
    std::printf(
        "%s on %s (%d threads); planned latency = p%.0f of the runs, outliers set aside, median of the passes\n"
        "%6s %6s %10s %10s %10s %10s %10s %8s %12s\n",
        m->name.c_str(), std::string(knob_name(kind)).c_str(), o->threads, 100 * o->po.quantile, "batch", "runs",
        "mean_ms", "p50_ms", "p99_ms", "planned_ms", "+-ms", "outliers", "req/s");
    std::vector<int> bs;
    std::vector<double> p99;
    for (auto& p : points) {
      std::printf("%6d %6d %10.3f %10.3f %10.3f %10.3f %10.3f %8d %12.1f%s\n", p.batch, p.runs, p.mean_ms, p.p50_ms,
                  p.p99_ms, p.ms, p.error_ms, p.outliers, p.ms > 0 ? p.batch / p.ms * 1000 : 0.0,
                  p.disagreed ? "  (passes disagreed; a third settled it)" : "");
      bs.push_back(p.batch);
      p99.push_back(p.ms);
    }
    auto lin = sched::fit_linear(bs, p99);
    auto quad = sched::fit_quadratic(bs, p99);
    if (lin.ok)
      std::printf("linear fit    l(b) = %.4g*b + %.4g ms            rms %.3g ms, max error %.1f%%\n", lin.b1, lin.c,
                  lin.rms_ms, 100 * lin.max_rel_err);
    if (quad.ok)
      std::printf("quadratic fit d(b) = %.4g*b^2 + %.4g*b + %.4g ms  rms %.3g ms, max error %.1f%%\n", quad.a, quad.b1,
                  quad.c, quad.rms_ms, 100 * quad.max_rel_err);
    auto yaml = to_profile_yaml(points, pads_batches(kind));
    std::printf("%s\n", yaml.c_str());
    if (!o->out.empty()) {
      std::ostringstream out;
      out << "# sloserve profile of " << m->name << " on " << knob_name(kind) << ", " << o->threads
          << " threads; planned latency per batch"
          << (o->po.inputs.empty() ? std::string() : ", images decoded in each batch") << "\n"
          << yaml << "\n";
      if (auto written = write_file(o->out, out.str()); !written) {
        std::cerr << "sloserve profile: " << written.error() << "\n";
        return void(rc = 1);
      }
    }
  });
}

}  // namespace sloserve
