// `sloserve keys`: CurveZMQ key pairs for the `security:` section.
//
//   sloserve keys -c cluster.yaml            a pair for every node, into the file's security.keys
//   sloserve keys --dir keys client1 ...     named pairs (clients, or nodes of another file)
//
// Each NAME gets NAME.key (both halves, mode 0600; stays on the host that uses it) and NAME.pub
// (the public half, to copy wherever NAME must be recognised).

#include <filesystem>
#include <iostream>

#include "apps/commands.hpp"
#include "messages/curve.hpp"

namespace sloserve {

void add_keys_command(CLI::App& app, int& rc) {
  struct opts {
    std::string config, dir;
    std::vector<std::string> names;
    bool force = false;
  };
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand("keys", "Generate CurveZMQ key pairs (NAME.key and NAME.pub)");
  cmd->add_option("-c,--config", o->config, "cluster file: a pair for each of its nodes, in its security.keys");
  cmd->add_option("--dir", o->dir, "where to write (default: the file's security.keys, else .)");
  cmd->add_option("names", o->names, "names to generate pairs for (clients, or extra nodes)");
  cmd->add_flag("--force", o->force, "replace existing key files");
  cmd->callback([o, &rc] {
    auto names = o->names;
    auto dir = o->dir;
    if (!o->config.empty()) {
      auto cfg = load_config_or_report(o->config);
      if (!cfg) return void(rc = 2);
      if (dir.empty()) {
        if (!cfg->security.enabled()) {
          std::cerr << o->config << ": has no security.keys; add one or pass --dir\n";
          return void(rc = 2);
        }
        dir = cfg->security.keys;
      }
      for (auto& n : cfg->nodes) names.push_back(n.name);
    }
    if (names.empty()) {
      std::cerr << "sloserve keys: name at least one key pair, or pass -c FILE\n";
      return void(rc = 2);
    }
    if (dir.empty()) dir = ".";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    for (auto& name : names) {
      if (name.empty() || name.find('/') != std::string::npos) {
        std::cerr << "sloserve keys: '" << name << "' is not a plain name\n";
        return void(rc = 2);
      }
      auto keys = generate_curve_pair();
      auto written = keys ? write_curve_files(dir, name, *keys, o->force) : status(fail(keys.error()));
      if (!written) {
        std::cerr << "sloserve keys: " << written.error() << "\n";
        return void(rc = 1);
      }
      std::cout << dir << "/" << name << ".key  " << dir << "/" << name << ".pub  public " << keys->public_key << "\n";
    }
  });
}

}  // namespace sloserve
