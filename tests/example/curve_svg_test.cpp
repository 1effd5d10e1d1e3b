// The training curve's SVG: axes ranged from the values (an accuracy below 0.5 is drawn where it is),
// round ticks, and a note for values that are not finite instead of an empty or clamped panel; drawn with
// fashion_mnist's two panels (a loss line; accuracy lines and dots in [0, 1]) and char_lm's one.
#include "curve_svg.hpp"  // examples/

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

struct point {
  std::uint64_t step = 0;
  double epoch = 0, loss = 0, accuracy = 0, test_accuracy = NAN;
};

bool has(const std::string& svg, const std::string& text) { return svg.find(text) != std::string::npos; }

std::string fashion_mnist_svg(const std::vector<point>& curve, const std::string& title) {
  const std::vector<plot::panel<point>> panels{
      {"training loss", {{[](const point& p) { return p.loss; }, "#1f77b4", false}}},
      {"accuracy", {{[](const point& p) { return p.accuracy; }, "#1f77b4", false}, {[](const point& p) { return p.test_accuracy; }, "#d62728", true}}, true}};
  return plot::curve_svg(curve, title, panels);
}

TEST(CurveSvg, TicksAreRoundNumbersCoveringTheRange) {
  const auto t = plot::nice_ticks(0.12, 0.73);
  EXPECT_DOUBLE_EQ(t.step, 0.2);  // (0.73 - 0.12) / 5 = 0.122: the next of 0.1, 0.2, 0.5
  EXPECT_DOUBLE_EQ(t.lo, 0.0);
  EXPECT_DOUBLE_EQ(t.hi, 0.8);
  EXPECT_EQ(t.at.size(), 5u);
  const auto steps = plot::nice_ticks(0, 937);
  EXPECT_DOUBLE_EQ(steps.step, 200);
  EXPECT_DOUBLE_EQ(steps.hi, 1000);
  const auto one = plot::nice_ticks(2.5, 2.5);  // a single value still gets a range
  EXPECT_LT(one.lo, 2.5);
  EXPECT_GT(one.hi, 2.5);
}

TEST(CurveSvg, AnAccuracyBelowOneHalfIsOnItsAxis) {
  const std::vector<point> curve{{100, 0.1, 2.2, 0.12, NAN}, {200, 0.2, 2.0, 0.25, NAN}, {300, 0.3, 1.9, 0.31, 0.3}};
  const std::string svg = fashion_mnist_svg(curve, "low");
  EXPECT_TRUE(has(svg, ">0.1</text>")) << svg;  // the accuracy axis starts at 0.1, not at 0.5
  EXPECT_TRUE(has(svg, ">0.35</text>") || has(svg, ">0.4</text>")) << svg;
  EXPECT_FALSE(has(svg, ">0.5</text>")) << svg;
  EXPECT_TRUE(has(svg, ">1.9</text>") && has(svg, ">2.2</text>")) << svg;  // the loss axis: 1.9 to 2.2, ticked
  EXPECT_TRUE(has(svg, ">300</text>")) << svg;  // step ticks
  EXPECT_FALSE(has(svg, "not finite")) << svg;
  EXPECT_EQ(std::string::npos, svg.find("nan"));
  // Three points per line, one test dot.
  std::size_t circles = 0;
  for (std::size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++circles;
  EXPECT_EQ(circles, 1u);
}

TEST(CurveSvg, NonFiniteValuesAreNotedNotDrawn) {
  const std::vector<point> curve{{100, 0.1, 0.9, 0.7, NAN}, {200, 0.2, NAN, 0.1, NAN}, {300, 0.3, INFINITY, 0.1, NAN}};
  const std::string svg = fashion_mnist_svg(curve, "diverged");
  EXPECT_TRUE(has(svg, "2 values not finite (NaN or inf), not drawn; the first at step 200")) << svg;
  EXPECT_EQ(std::string::npos, svg.find("nan"));
  EXPECT_EQ(std::string::npos, svg.find("inf\""));
}

TEST(CurveSvg, AnEmptyCurveSaysSo) {
  const std::string svg = fashion_mnist_svg(std::vector<point>{}, "empty");
  EXPECT_TRUE(has(svg, "no values yet")) << svg;
  EXPECT_TRUE(has(svg, "</svg>"));
}

TEST(CurveSvg, OnePanelOfBitsPerCharacter) {  // char_lm: training bits every step logged, validation at some
  struct bits {
    std::uint64_t step = 0;
    double train = 0, validation = NAN;
  };
  const std::vector<bits> curve{{100, 4.6, NAN}, {200, 4.1, 4.2}, {300, 3.7, NAN}, {400, 3.4, 3.5}};
  const std::string svg = plot::curve_svg(
      curve, "char_lm",
      std::vector<plot::panel<bits>>{{"bits per character", {{[](const bits& b) { return b.train; }, "#1f77b4", false},
                                                              {[](const bits& b) { return b.validation; }, "#d62728", true}}}});
  EXPECT_TRUE(has(svg, "width=\"460\"")) << svg;  // one panel wide
  EXPECT_TRUE(has(svg, ">bits per character</text>")) << svg;
  EXPECT_TRUE(has(svg, ">3.5</text>") && has(svg, ">4.5</text>")) << svg;  // ranged from 3.4 to 4.6
  std::size_t circles = 0;
  for (std::size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++circles;
  EXPECT_EQ(circles, 2u);
  EXPECT_EQ(std::string::npos, svg.find("nan"));
}

}  // namespace
