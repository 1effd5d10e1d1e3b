#pragma once
// A training curve as an SVG picture: panels side by side, each one or more series against the step (a
// line, or dots where a value is measured only at some steps: NaN elsewhere). Each axis is ranged from the
// values it shows and ticked at round numbers (1, 2 or 5 times a power of ten); a value that is not finite
// (a diverged loss) is not drawn, and the panel says how many there were and the first step that had one.
// fashion_mnist draws its loss and its accuracies, char_lm its training and validation bits per character.
//
// Point is any struct with an integer `step`; each series reads its value from a Point.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace plot {

// Round tick positions covering [lo, hi]: about `count` of them, a step of 1, 2 or 5 times a power of ten.
struct axis_ticks {
  double lo = 0, hi = 1, step = 0.25;
  std::vector<double> at;
};

inline axis_ticks nice_ticks(double lo, double hi, int count = 5) {
  if (!(hi > lo)) {  // one value (or none): a unit-wide range around it
    const double mid = std::isfinite(lo) ? lo : 0.0;
    const double half = mid == 0 ? 0.5 : std::abs(mid) * 0.1;
    lo = mid - half, hi = mid + half;
  }
  const double raw = (hi - lo) / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / power;
  const double step = (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power;
  axis_ticks t;
  t.step = step;
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  for (double v = t.lo; v <= t.hi + step * 0.5; v += step) t.at.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

template <class Point>
struct series {
  double (*value)(const Point&);
  const char* color;
  bool dots;  // dots, each NaN a point not measured (test accuracy at epoch ends); else a line
};

template <class Point>
struct panel {
  std::string name;
  std::vector<series<Point>> lines;
  bool unit_interval = false;  // an accuracy: the axis stays within [0, 1]
};

template <class Point>
std::string curve_svg(const std::vector<Point>& curve, const std::string& title, const std::vector<panel<Point>>& panels) {
  constexpr double w = 440, h = 300, left = 60, top = 40, right = 20, bottom = 52;
  constexpr double pw = w - left - right, ph = h - top - bottom;
  const double width = 10 + 450 * static_cast<double>(panels.size());
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"320\" font-family=\"sans-serif\" "
                "font-size=\"12\">\n<rect width=\"%.0f\" height=\"320\" fill=\"white\"/>\n",
                width, width);
  std::string svg = buf;
  auto text = [&](double x, double y, const char* anchor, const std::string& s, const char* extra = "") {
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, extra);
    svg += buf + s + "</text>\n";
  };
  auto number = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };

  double max_step = 1;
  for (const Point& p : curve) max_step = std::max(max_step, static_cast<double>(p.step));
  const axis_ticks xs = nice_ticks(0, max_step);

  auto draw = [&](double x0, const std::string& name, const std::vector<series<Point>>& lines, bool unit_interval) {
    // The range of the finite values shown; the non-finite ones counted.
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    std::size_t non_finite = 0;
    std::uint64_t first_bad = 0;
    for (const series<Point>& s : lines)
      for (const Point& p : curve) {
        const double v = s.value(p);
        if (std::isnan(v) && s.dots) continue;  // not measured at this point
        if (!std::isfinite(v)) {
          if (non_finite++ == 0 || p.step < first_bad) first_bad = p.step;
          continue;
        }
        lo = std::min(lo, v), hi = std::max(hi, v);
      }
    const bool any = lo <= hi;
    if (!any) lo = 0, hi = 1;
    if (unit_interval) lo = std::max(0.0, lo), hi = std::min(1.0, std::max(hi, lo));
    axis_ticks ys = nice_ticks(lo, hi);
    if (unit_interval) ys.lo = std::max(0.0, ys.lo), ys.hi = std::min(1.0, ys.hi);
    auto px = [&](double step) { return x0 + left + pw * (step - xs.lo) / (xs.hi - xs.lo); };
    auto py = [&](double v) { return top + ph * (1.0 - (v - ys.lo) / (ys.hi - ys.lo)); };

    std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n",
                  x0 + left, top, pw, ph);
    svg += buf;
    text(x0 + left + pw / 2, top - 8, "middle", name);
    for (double v : ys.at) {
      if (v < ys.lo - ys.step * 1e-6 || v > ys.hi + ys.step * 1e-6) continue;
      std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0 + left,
                    py(v), x0 + left + pw, py(v));
      svg += buf;
      text(x0 + left - 4, py(v) + 4, "end", number(v));
    }
    for (double v : xs.at) {
      std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", px(v),
                    top + ph, px(v), top + ph + 4);
      svg += buf;
      text(px(v), top + ph + 16, "middle", number(v));
    }
    text(x0 + left + pw / 2, top + ph + 30, "middle", "step");
    if (non_finite > 0)
      text(x0 + left + pw / 2, top + ph + 46, "middle",
           std::to_string(non_finite) + " value" + (non_finite == 1 ? "" : "s") + " not finite (NaN or inf), not drawn; the first at step " +
               std::to_string(first_bad),
           " fill=\"#d62728\"");
    else if (!any)
      text(x0 + left + pw / 2, top + ph / 2, "middle", "no values yet", " fill=\"#888\"");

    for (const series<Point>& s : lines) {
      std::string points;
      for (const Point& p : curve) {
        const double v = s.value(p);
        if (!std::isfinite(v)) continue;
        if (s.dots) {
          std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(static_cast<double>(p.step)),
                        py(v), s.color);
          svg += buf;
        } else {
          std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(static_cast<double>(p.step)), py(v));
          points += buf;
        }
      }
      if (!points.empty())
        svg += "<polyline fill=\"none\" stroke=\"" + std::string(s.color) + "\" stroke-width=\"1.5\" points=\"" + points + "\"/>\n";
    }
  };
  for (std::size_t i = 0; i < panels.size(); ++i)
    draw(450 * static_cast<double>(i), panels[i].name, panels[i].lines, panels[i].unit_interval);
  text(width / 2, 16, "middle", title, " font-size=\"14\"");
  svg += "</svg>\n";
  return svg;
}

}  // namespace plot
