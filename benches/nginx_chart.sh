#!/usr/bin/env bash
# nginx_chart.sh — draws the summary of a proxy_vs_nginx.sh run as an SVG: median requests per
# second and median p99 latency of nginx and tollgate, side by side, per scenario.
#
# Run:
#   SCENARIO=all KEEP=1 benches/proxy_vs_nginx.sh      # prints "kept … in DIR" at the end
#   benches/nginx_chart.sh DIR/summary.tsv > docs/nginx-comparison.svg
#   SCENARIOS="proxy limit_pass" benches/nginx_chart.sh DIR/summary.tsv > chart.svg
#
# SCENARIOS [proxy limit_pass limit_reject]: which rows of the summary to draw, in that order.
# The summary's columns: scenario, nginx req/s, tollgate req/s, ratio, runs flagged, nginx p99 µs,
# tollgate p99 µs. Needs awk only.
set -euo pipefail

summary="${1:?usage: nginx_chart.sh SUMMARY.tsv > chart.svg}"
[ -s "$summary" ] || { echo "nginx_chart: $summary is empty or missing" >&2; exit 1; }
scenarios="${SCENARIOS:-proxy limit_pass limit_reject}"
note="${NOTE:-medians of interleaved wrk runs; 2 cores: wrk on one, proxy and upstream on the other}"

awk -F'\t' -v order="$scenarios" -v note="$note" '
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); return s }
function label(s) {
    if (s == "proxy") return "plain proxy"
    if (s == "limit_pass") return "limit, all pass"
    if (s == "limit_reject") return "limit, all 429"
    return s
}
# One panel: title, unit, values nginx[i] and tollgate[i] for the n scenarios, at x0.
function panel(x0, title, unit, scale_to, nv, tv,    i, top, h, x, y, bw, gap, v) {
    top = 0
    for (i = 1; i <= n; i++) { if (nv[i] > top) top = nv[i]; if (tv[i] > top) top = tv[i] }
    if (top <= 0) top = 1
    h = 220; bw = 34; gap = 30
    printf "<text x=\"%d\" y=\"40\" class=\"title\">%s</text>\n", x0, esc(title)
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>\n", x0, 60 + h, x0 + n * (2 * bw + gap), 60 + h
    for (i = 1; i <= n; i++) {
        x = x0 + (i - 1) * (2 * bw + gap) + 8
        v = nv[i] * h / top; y = 60 + h - v
        printf "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" class=\"nginx\"/>\n", x, y, bw, v
        printf "<text x=\"%d\" y=\"%.1f\" class=\"value\">%s</text>\n", x + bw / 2, y - 4, fmt(nv[i] / scale_to)
        v = tv[i] * h / top; y = 60 + h - v
        printf "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" class=\"tollgate\"/>\n", x + bw, y, bw, v
        printf "<text x=\"%d\" y=\"%.1f\" class=\"value\">%s</text>\n", x + 1.5 * bw, y - 4, fmt(tv[i] / scale_to)
        printf "<text x=\"%d\" y=\"%d\" class=\"label\">%s</text>\n", x + bw, 60 + h + 18, esc(label(name[i]))
    }
    printf "<text x=\"%d\" y=\"%d\" class=\"unit\">%s</text>\n", x0, 60 + h + 40, esc(unit)
}
function fmt(v) { return v >= 100 ? sprintf("%.0f", v) : sprintf("%.1f", v) }
{ rps_n[$1] = $2; rps_t[$1] = $3; p99_n[$1] = $6; p99_t[$1] = $7 }
END {
    n = split(order, want, " ")
    for (i = 1; i <= n; i++) {
        if (!(want[i] in rps_n)) { print "nginx_chart: no row for " want[i] > "/dev/stderr"; exit 1 }
        name[i] = want[i]
        a[i] = rps_n[want[i]]; b[i] = rps_t[want[i]]; c[i] = p99_n[want[i]]; d[i] = p99_t[want[i]]
    }
    width = 2 * (n * 98 + 40) + 60
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"390\" viewBox=\"0 0 %d 390\" font-family=\"sans-serif\">\n", width, width
    print "<style>.title{font-size:15px;font-weight:600}.value{font-size:11px;text-anchor:middle}.label{font-size:12px;text-anchor:middle}.unit,.note{font-size:11px;fill:#57606a}.axis{stroke:#8c959f}.nginx{fill:#8c959f}.tollgate{fill:#1f6feb}</style>"
    print "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
    panel(20, "requests per second (higher is better)", "thousand requests per second", 1000, a, b)
    panel(20 + n * 98 + 60, "p99 latency (lower is better)", "milliseconds", 1000, c, d)
    printf "<rect x=\"20\" y=\"350\" width=\"12\" height=\"12\" class=\"nginx\"/><text x=\"38\" y=\"360\" class=\"label\" style=\"text-anchor:start\">nginx</text>\n"
    printf "<rect x=\"100\" y=\"350\" width=\"12\" height=\"12\" class=\"tollgate\"/><text x=\"118\" y=\"360\" class=\"label\" style=\"text-anchor:start\">tollgate</text>\n"
    printf "<text x=\"20\" y=\"380\" class=\"note\">%s</text>\n", esc(note)
    print "</svg>"
}' "$summary"
