// report.html: the report document as one page. Sections follow the order a reader asks in (what
// should I do, where do the devices cross, what was measured, where did the time go, what is
// predicted and what it costs, on what machine); each appears only when the document has its data.
// Charts are inline SVG (report/svg.h); the page has no script and a Content-Security-Policy that
// forbids loading anything, so it is the same offline, in a mail attachment or in CI artefacts.
// The sections are drawn in report/html_*.cpp; this file assembles the page and holds its style.
#include "report/html.h"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/file.h"
#include "report/html_parts.h"
#include "report/html_sections.h"
#include "report/report_json.h"

namespace xo {

using html::DeviceColours;
using html::escape;

namespace {

struct Section {
  std::string id, title, html;
};

std::string header_html(const Report& report, const std::vector<Section>& sections) {
  const std::string title = report.title.empty() ? "crossover report" : report.title;
  std::string out = "<header>\n<h1>" + escape(title) + "</h1>\n";
  std::vector<std::string> meta;
  if (!report.kind.empty()) meta.push_back(escape(report.kind));
  meta.push_back("created " + html::text_cell(report.created));
  if (report.machine && !report.machine->crossover.empty())
    meta.push_back("crossover " + escape(report.machine->crossover));
  out += "<p class=\"meta\">";
  for (size_t i = 0; i < meta.size(); ++i) out += (i ? " · " : "") + meta[i];
  out += "</p>\n";
  if (!report.complete) {
    out +=
        "<div class=\"banner partial\">partial: interrupted — the run stopped before it finished; "
        "this page shows what completed.</div>\n";
  }
  if (sections.size() > 1) {
    out += "<nav>";
    for (const Section& s : sections) out += fmt::format("<a href=\"#{}\">{}</a>", s.id, s.title);
    out += "</nav>\n";
  }
  return out + "</header>\n";
}

constexpr std::string_view kStyle = R"(
:root{--fg:#1d2330;--muted:#5b6475;--line:#dde2ea;--panel:#f5f7fa;--accent:#0b5cad}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",sans-serif}
main{max-width:1100px;margin:0 auto;padding:28px 20px 56px}
h1{font-size:1.65em;line-height:1.25;margin:0 0 .2em}
h2{font-size:1.25em;margin:2.2em 0 .7em;padding-bottom:.3em;border-bottom:1px solid var(--line)}
h3{font-size:1.02em;margin:1.4em 0 .4em}
.meta,.note{color:var(--muted)}
.note{font-size:.88em}
nav{margin:.8em 0 0;font-size:.9em}
nav a{color:var(--accent);text-decoration:none;margin-right:1.1em;white-space:nowrap}
.banner{margin:1em 0;background:#fff4e5;border:1px solid #f0b35b;color:#7a4300;padding:.6em .9em;border-radius:6px;font-weight:600}
.advice{margin:0;background:#eef5ff;border-left:4px solid var(--accent);padding:.9em 1.2em .9em 2.4em;border-radius:4px;font-size:1.05em}
.advice li+li{margin-top:.35em}
.verdict{margin:0 0 .6em;padding:.9em 1.2em;border-radius:4px;font-size:1.1em;border-left:4px solid}
.verdict.yes{background:#eaf7ee;border-color:#2e8b57}
.verdict.no{background:#fff6e5;border-color:#d98e04}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.9em;margin:.3em 0 .9em}
th,td{padding:.36em .6em;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:var(--panel);font-weight:600;white-space:nowrap}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:hover{background:#fafbfd}
table.machine td:first-child{white-space:nowrap;color:var(--muted);width:12em}
table.machine td{word-break:break-word}
table.runs td,table.outcomes td{white-space:nowrap}
table.outcomes td:last-child{white-space:normal;min-width:16em}
.device{white-space:nowrap}
.na{color:#9aa3b2}
.badge{display:inline-block;font-size:.72em;font-weight:600;line-height:1.5;padding:0 .55em;border-radius:999px;background:#f1e7fb;color:#5b2a86;vertical-align:.1em}
.badge.measured{background:#e3f4ea;color:#1d6b3a}
.swatch{display:inline-block;width:.75em;height:.75em;border-radius:2px;margin-right:.45em;vertical-align:-.04em}
.share{display:inline-block;width:5em;height:.6em;margin-right:.5em;background:#e8edf5;border-radius:3px;overflow:hidden}
.share span{display:block;height:100%;background:#4C78A8}
details{margin:.3em 0}
summary{cursor:pointer;font-weight:600;padding:.2em 0}
ul.assumptions{margin:0;padding-left:1.1em;color:var(--muted);font-size:.9em;min-width:26em}
.notes{margin:.2em 0 .8em;color:var(--muted);font-size:.9em}
ol.sources{color:var(--muted);font-size:.82em;padding-left:2em;word-break:break-word}
a{color:var(--accent)}
ul.kv{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1.6em;font-size:.9em}
ul.kv .k{color:var(--muted)}
svg{display:block;width:100%;height:auto;margin:.3em 0 1em;font-family:inherit;overflow:visible}
svg text{font-size:12px;fill:#3a4150}
svg .axis-label{font-size:12.5px;font-weight:600;fill:var(--fg)}
svg .panel-title{font-weight:600;fill:var(--fg)}
svg .muted{font-weight:400;fill:var(--muted)}
svg .mark-label{font-weight:600;fill:var(--fg);paint-order:stroke;stroke:#fff;stroke-width:3px}
svg text.inside{fill:#fff;font-size:11px}
svg line.major{stroke:#e3e7ee}
svg line.minor{stroke:#f1f3f7}
svg .frame{fill:none;stroke:#c8cfda}
footer{margin-top:3em;color:var(--muted);font-size:.85em;border-top:1px solid var(--line);padding-top:.8em}
)";

}  // namespace

std::string html::html_page(const std::string& title, const std::string& header,
                            const std::vector<PageSection>& sections, std::string_view schema) {
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // Nothing may load from anywhere: the page is complete as it is, and a string that escaped
      // escaping could still not run a script.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'\">\n<meta name=\"viewport\" content=\"width=device-width, "
      "initial-scale=1\">\n<title>" +
      escape(title) + "</title>\n<style>" + std::string(kStyle) +
      "</style>\n</head>\n<body>\n<main>\n";
  page += header;
  for (const PageSection& s : sections) {
    page += fmt::format("<section id=\"{}\">\n<h2>{}{}</h2>\n", s.id, s.title,
                        s.predicted ? " <span class=\"badge\">predicted</span>" : "");
    page += s.html + "</section>\n";
  }
  if (sections.empty()) page += "<p class=\"note\">This report holds no results yet.</p>\n";
  page += fmt::format(
      "<footer>Written by crossover · {} · self-contained: this page loads nothing from "
      "elsewhere.</footer>\n</main>\n</body>\n</html>\n",
      schema);
  return page;
}

std::string render_html_report(const Report& report) {
  const DeviceColours colours = html::device_colours(report);
  std::vector<Section> sections;
  auto add = [&](const char* id, const char* title, std::string body) {
    if (!body.empty()) sections.push_back({id, title, std::move(body)});
  };
  add("verdict", "Verdict", html::verdict_html(report));
  add("advice", "Advice", html::advice_html(report));
  add("sweep", "Sweep", html::sweep_html(report, colours));
  add("results", "Results", html::runs_html(report, colours));
  add("peaks", "Peaks and achieved fraction", html::peaks_html(report, colours));
  add("time-split", "Time split", html::phases_html(report, colours));
  add("layers", "Per-layer profile", html::layers_html(report));
  add("utilisation", "Utilisation", html::timelines_html(report, colours));
  add("predictions", "Predictions", html::predictions_html(report, colours));
  add("cost", "Cost", html::cost_html(report, colours));
  add("machine", "Machine", html::machine_html(report));

  const std::string title = report.title.empty() ? "crossover report" : report.title;
  std::vector<html::PageSection> page_sections;
  for (Section& s : sections) {
    page_sections.push_back({s.id, s.title, std::move(s.html), s.id == "predictions"});
  }
  return html::html_page(title, header_html(report, sections), page_sections, kReportSchema);
}

std::string render_html_report(const nlohmann::json& report) {
  return render_html_report(read_report(report, "", ReadMode::Lenient));
}

void write_html_report(const std::filesystem::path& file, const Report& report) {
  write_file_atomic(file, render_html_report(report));
}

}  // namespace xo
