#include "loadgen/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sloserve {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A round step (1, 2 or 5 times a power of ten) that cuts [0, max] into about five.
double nice_step(double max) {
  double raw = max / 5, p = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

struct line {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
};

// A line chart in SVG: axes with five ticks each, the lines, a dashed level (`mark`, when > 0)
// and a legend.
std::string chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                  const std::vector<line>& lines, double mark = -1, const std::string& mark_label = "") {
  const double W = 720, H = 300, L = 60, R = 20, T = 30, B = 45;
  double xmax = 1e-9, ymax = 1e-9;
  for (auto& l : lines)
    for (auto& [x, y] : l.points) xmax = std::max(xmax, x), ymax = std::max(ymax, y);
  if (mark > 0) ymax = std::max(ymax, mark * 1.05);
  double xstep = nice_step(xmax), ystep = nice_step(ymax);
  int xticks = static_cast<int>(std::ceil(xmax / xstep - 1e-9)),
      yticks = static_cast<int>(std::ceil(ymax / ystep - 1e-9));
  xmax = xstep * xticks;
  ymax = ystep * yticks;
  auto X = [&](double x) { return L + (W - L - R) * x / xmax; };
  auto Y = [&](double y) { return H - B - (H - T - B) * y / ymax; };
  std::string s = "<figure><svg viewBox=\"0 0 " + num(W) + " " + num(H) + "\" width=\"" + num(W) + "\" height=\"" +
                  num(H) + "\" role=\"img\" aria-label=\"" + escape(title) + "\">\n";
  s += "<text x=\"" + num(L) + "\" y=\"18\" class=\"title\">" + escape(title) + "</text>\n";
  s += "<line x1=\"" + num(L) + "\" y1=\"" + num(H - B) + "\" x2=\"" + num(W - R) + "\" y2=\"" + num(H - B) +
       "\" class=\"axis\"/><line x1=\"" + num(L) + "\" y1=\"" + num(T) + "\" x2=\"" + num(L) + "\" y2=\"" + num(H - B) +
       "\" class=\"axis\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    double x = xmax * i / 5, y = ymax * i / 5;
    s += "<text x=\"" + num(X(x)) + "\" y=\"" + num(H - B + 16) + "\" class=\"tick\" text-anchor=\"middle\">" + num(x) +
         "</text>";
    s += "<text x=\"" + num(L - 6) + "\" y=\"" + num(Y(y) + 4) + "\" class=\"tick\" text-anchor=\"end\">" + num(y) +
         "</text>";
    s += "<line x1=\"" + num(L) + "\" y1=\"" + num(Y(y)) + "\" x2=\"" + num(W - R) + "\" y2=\"" + num(Y(y)) +
         "\" class=\"grid\"/>\n";
  }
  s += "<text x=\"" + num((L + W - R) / 2) + "\" y=\"" + num(H - 8) + "\" class=\"label\" text-anchor=\"middle\">" +
       escape(x_label) + "</text>";
  s += "<text x=\"14\" y=\"" + num((T + H - B) / 2) + "\" class=\"label\" transform=\"rotate(-90 14 " +
       num((T + H - B) / 2) + ")\" text-anchor=\"middle\">" + escape(y_label) + "</text>\n";
  if (mark > 0)
    s += "<line x1=\"" + num(L) + "\" y1=\"" + num(Y(mark)) + "\" x2=\"" + num(W - R) + "\" y2=\"" + num(Y(mark)) +
         "\" class=\"mark\"/><text x=\"" + num(W - R) + "\" y=\"" + num(Y(mark) - 4) +
         "\" class=\"tick\" text-anchor=\"end\">" + escape(mark_label) + "</text>\n";
  double legend_x = L + 10;
  for (auto& l : lines) {
    std::string pts;
    for (auto& [x, y] : l.points) pts += num(X(x)) + "," + num(Y(y)) + " ";
    s += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + l.color + "\" stroke-width=\"1.5\"/>\n";
    s += "<rect x=\"" + num(legend_x) + "\" y=\"" + num(T - 2) + "\" width=\"10\" height=\"3\" fill=\"" + l.color +
         "\"/><text x=\"" + num(legend_x + 14) + "\" y=\"" + num(T + 2) + "\" class=\"tick\">" + escape(l.name) +
         "</text>\n";
    legend_x += 30 + 7 * static_cast<double>(l.name.size());
  }
  return s + "</svg></figure>\n";
}

}  // namespace

std::string html_report(const report_inputs& in) {
  auto& s = *in.summary;
  auto& o = *in.options;
  nlohmann::json data{
      {"summary", s.to_json(o)}, {"latency_cdf", s.cdf}, {"command", in.command}, {"config", in.config}};
  auto embedded = data.dump();
  // Inside <script>, "</" would end it early.
  for (size_t at = 0; (at = embedded.find("</", at)) != std::string::npos; at += 3) embedded.replace(at, 2, "<\\/");

  std::vector<std::pair<double, double>> sent, ok, dropped, errors, p99, attainment;
  for (auto& x : s.series) {
    double t = x["t"].get<double>(), n = x["sent"].get<double>();
    sent.emplace_back(t, n);
    ok.emplace_back(t, x["ok_within_slo"].get<double>());
    dropped.emplace_back(t, x["dropped"].get<double>());
    errors.emplace_back(t, x["errors"].get<double>());
    p99.emplace_back(t, x["p99_ms"].get<double>());
    attainment.emplace_back(t, n > 0 ? 100 * x["ok_within_slo"].get<double>() / n : 100);
  }
  std::string page = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sloserve load: )" +
                     escape(o.pipeline) + R"(</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 780px; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: right; border-bottom: 1px solid #ddd; }
th { text-align: left; } pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
.title { font-weight: bold; font-size: 14px; } .tick { font-size: 11px; fill: #444; } .label { font-size: 12px; }
.axis { stroke: #333; } .grid { stroke: #eee; } .mark { stroke: #c00; stroke-dasharray: 4 3; }
figure { margin: 16px 0; }
</style></head><body>
<h1>sloserve load: )" +
                     escape(o.pipeline) + "</h1>\n<table>\n";
  auto row = [&](const std::string& k, const std::string& v) {
    page += "<tr><th>" + escape(k) + "</th><td>" + escape(v) + "</td></tr>\n";
  };
  row("sent", std::to_string(s.sent));
  row("ok (within SLO)", std::to_string(s.ok) + " (" + std::to_string(s.ok_within_slo) + ")");
  row("dropped / overloaded / errors / lost", std::to_string(s.dropped) + " / " + std::to_string(s.overloaded) + " / " +
                                                  std::to_string(s.errors) + " / " + std::to_string(s.lost));
  row("attainment", num(100 * s.attainment) + "%");
  row("goodput", num(s.goodput_rps) + " req/s");
  row("latency p50 / p90 / p99 / max",
      num(s.p50) + " / " + num(s.p90) + " / " + num(s.p99) + " / " + num(s.max) + " ms");
  row("SLO", num(o.slo_ms) + " ms");
  page += "</table>\n";
  std::vector<std::pair<double, double>> cdf;
  for (auto& [ms, f] : s.cdf) cdf.emplace_back(ms, f);
  page += chart("Latency CDF of OK replies", "latency (ms)", "fraction", {{"OK replies", "#1f77b4", cdf}});
  page += chart("Requests per second", "second of the measured window", "requests",
                {{"sent", "#555", sent},
                 {"ok within SLO", "#2ca02c", ok},
                 {"dropped", "#ff7f0e", dropped},
                 {"errors", "#d62728", errors}});
  page += chart("p99 latency per second", "second", "ms", {{"p99", "#9467bd", p99}}, o.slo_ms, "SLO");
  page += chart("Attainment per second", "second", "% within SLO", {{"attainment", "#2ca02c", attainment}});
  page += "<h2>Command</h2>\n<pre>" + escape(in.command) + "</pre>\n<h2>Cluster file</h2>\n<pre>" + escape(in.config) +
          "</pre>\n";
  page += "<script type=\"application/json\" id=\"sloserve-run\">" + embedded + "</script>\n</body></html>\n";
  return page;
}

nlohmann::json report_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"sloserve-run\">";
  auto a = html.find(open);
  if (a == std::string::npos) return nullptr;
  a += open.size();
  auto b = html.find("</script>", a);
  if (b == std::string::npos) return nullptr;
  auto text = html.substr(a, b - a);
  for (size_t at = 0; (at = text.find("<\\/", at)) != std::string::npos; at += 2) text.replace(at, 3, "</");
  return nlohmann::json::parse(text, nullptr, false);
}

}  // namespace sloserve
