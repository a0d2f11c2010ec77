// Pictures of `sluice simulate` runs, read back as XML: they are well-formed, their marks say
// what the CSV of the same run says, request by request, and --compare's panels share their axes.
#include "simulate/picture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "simulate/simulate.h"
#include "simulate/xml_document.h"

namespace sluice::simulate {
namespace {

using testing::XmlElement;

const char* const kExampleTraces[] = {"burst.txt", "boundary.txt", "overload.txt", "trickle.txt"};

std::string ExampleTrace(const std::string& name) {
  std::ifstream in(std::string(SLUICE_TRACES_DIR) + "/" + name);
  EXPECT_TRUE(in) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// 5 per 10 s, as in docs/algorithms.md.
Limit FivePerTenSeconds(Algorithm a, std::optional<int64_t> burst = std::nullopt) {
  auto limit = Limit::Create(a, 5, std::chrono::seconds(10), IsMeter(a) ? burst : std::nullopt);
  EXPECT_TRUE(limit.ok()) << limit.status().message();
  return *limit;
}

std::vector<Limit> AllAlgorithms(std::optional<int64_t> burst = std::nullopt) {
  std::vector<Limit> limits;
  for (const Algorithm a : kAllAlgorithms) limits.push_back(FivePerTenSeconds(a, burst));
  return limits;
}

// What the CSV says of each request: "admitted", "booked" (admitted after a wait) or "denied".
std::vector<std::string> CsvOutcomes(const Limit& limit, const std::string& trace,
                                     Duration max_wait = Duration(0)) {
  std::istringstream in(trace);
  std::ostringstream out, err;
  EXPECT_EQ(Simulate(limit, in, out, err, max_wait), 0) << err.str();
  std::istringstream rows(out.str());
  std::string row;
  std::getline(rows, row);  // the header
  std::vector<std::string> outcomes;
  while (std::getline(rows, row)) {
    std::vector<std::string> cells;
    std::istringstream cells_in(row);
    for (std::string cell; std::getline(cells_in, cell, ',');) cells.push_back(cell);
    const bool booked = cells.size() == 7 && cells[6] != "0";
    outcomes.push_back(cells.at(2) == "false" ? "denied" : booked ? "booked" : "admitted");
  }
  return outcomes;
}

// What a panel's marks say, in document order.
std::vector<std::string> MarkOutcomes(const XmlElement& panel) {
  std::vector<std::string> outcomes;
  for (const XmlElement* mark : panel.FindAll(
           [](const XmlElement& e) { return e.HasClass("admitted") || e.HasClass("denied"); })) {
    outcomes.push_back(mark->HasClass("denied")   ? "denied"
                       : mark->HasClass("booked") ? "booked"
                                                  : "admitted");
  }
  return outcomes;
}

int64_t CountOf(const std::vector<std::string>& outcomes, const std::string& outcome) {
  return std::count(outcomes.begin(), outcomes.end(), outcome);
}

// The picture's root element; an empty one (after a test failure) if it is not well-formed XML.
XmlElement Draw(std::span<const Limit> limits, const std::string& trace,
                Duration max_wait = Duration(0), std::string_view title = "a trace") {
  std::istringstream in(trace);
  std::string svg;
  std::ostringstream err;
  EXPECT_EQ(SimulatePicture(limits, in, title, svg, err, max_wait), 0) << err.str();
  auto root = testing::ReadXml(svg);
  if (!root.ok()) {
    ADD_FAILURE() << root.status().message() << "\n" << svg;
    return {};
  }
  return *root;
}

// The texts of an axis group and where they stand, to compare axes between panels.
std::vector<std::string> AxisLabels(const XmlElement& panel, std::string_view axis) {
  std::vector<std::string> labels;
  for (const XmlElement* group : panel.WithClass(axis)) {
    for (const XmlElement& e : group->children) {
      if (e.name == "text")
        labels.push_back(e.Attribute("x") + "," + e.Attribute("y") + ":" + e.text);
    }
  }
  return labels;
}

// The header of a panel: its title and its counts.
std::string HeaderText(const XmlElement& panel) {
  std::string header;
  for (const XmlElement& e : panel.children) {
    if (e.name == "text" && std::stod(e.Attribute("y")) < 20) header += e.text + "|";
  }
  return header;
}

TEST(Picture, MarksEveryDecisionOfTheCsv) {
  for (const char* name : kExampleTraces) {
    const std::string trace = ExampleTrace(name);
    for (const Limit& limit : AllAlgorithms()) {
      SCOPED_TRACE(std::string(name) + " " + std::string(AlgorithmName(limit.algorithm())));
      const XmlElement root = Draw({&limit, 1}, trace);
      const auto panels = root.WithClass("panel");
      ASSERT_EQ(panels.size(), 1u);
      const std::vector<std::string> csv = CsvOutcomes(limit, trace);
      EXPECT_GE(csv.size(), 9u);
      EXPECT_EQ(MarkOutcomes(*panels[0]), csv);
      EXPECT_NE(HeaderText(*panels[0])
                    .find(std::to_string(CountOf(csv, "admitted")) + " admitted, " +
                          std::to_string(CountOf(csv, "denied")) + " denied"),
                std::string::npos)
          << HeaderText(*panels[0]);
    }
  }
}

TEST(Picture, BookedRequestsHaveALineToTheirSlot) {
  const Limit limit = FivePerTenSeconds(Algorithm::kGcra);
  const std::string trace = ExampleTrace("burst.txt");
  const XmlElement root = Draw({&limit, 1}, trace, std::chrono::seconds(5));
  const std::vector<std::string> csv = CsvOutcomes(limit, trace, std::chrono::seconds(5));
  EXPECT_EQ(MarkOutcomes(root), csv);
  EXPECT_GT(CountOf(csv, "booked"), 0);
  EXPECT_EQ(static_cast<int64_t>(root.WithClass("wait").size()), CountOf(csv, "booked"));
  EXPECT_NE(HeaderText(root.children.back()).find("max wait 5s"), std::string::npos);
}

TEST(ComparePicture, SixPanelsOnTheSameAxes) {
  const std::vector<Limit> limits = AllAlgorithms();
  for (const char* name : kExampleTraces) {
    SCOPED_TRACE(name);
    const std::string trace = ExampleTrace(name);
    const XmlElement root = Draw(limits, trace);
    const auto panels = root.WithClass("panel");
    ASSERT_EQ(panels.size(), 6u);
    for (size_t i = 0; i < panels.size(); ++i) {
      const std::string algorithm(AlgorithmName(kAllAlgorithms[i]));
      EXPECT_EQ(panels[i]->Attribute("data-algorithm"), algorithm);
      EXPECT_EQ(HeaderText(*panels[i]).rfind(algorithm + ": 5 per 10s", 0), 0u)
          << HeaderText(*panels[i]);
      EXPECT_EQ(MarkOutcomes(*panels[i]), CsvOutcomes(limits[i], trace)) << algorithm;
      EXPECT_EQ(AxisLabels(*panels[i], "time-axis"), AxisLabels(*panels[0], "time-axis"));
      EXPECT_EQ(AxisLabels(*panels[i], "units-axis"), AxisLabels(*panels[0], "units-axis"));
    }
    const std::vector<std::string> time_labels = AxisLabels(*panels[0], "time-axis");
    ASSERT_FALSE(time_labels.empty());
    EXPECT_NE(time_labels.back().find("time (s)"), std::string::npos);
  }
}

// With a burst above the limit the bucket panels reach higher: every panel's units axis still
// runs to the largest capacity, and each draws its own capacity on it.
TEST(ComparePicture, OneUnitsAxisForEveryCapacity) {
  const XmlElement root = Draw(AllAlgorithms(8), ExampleTrace("burst.txt"));
  const auto panels = root.WithClass("panel");
  ASSERT_EQ(panels.size(), 6u);
  const std::vector<std::string> units = AxisLabels(*panels[0], "units-axis");
  ASSERT_GE(units.size(), 3u);
  EXPECT_NE(units[units.size() - 3].find(":8"), std::string::npos);  // then the two axis titles
  const auto capacity_y = [](const XmlElement& panel) {
    const auto lines = panel.WithClass("capacity");
    EXPECT_EQ(lines.size(), 1u);
    return lines.empty() ? 0.0 : std::stod(lines[0]->Attribute("y1"));
  };
  for (size_t i = 0; i < panels.size(); ++i) {
    EXPECT_EQ(AxisLabels(*panels[i], "units-axis"), units);
    const bool bucket = IsMeter(kAllAlgorithms[i]);
    // y grows downwards: a capacity of 5 stands lower than one of 8.
    EXPECT_EQ(capacity_y(*panels[i]) > capacity_y(*panels.back()), !bucket) << i;
    EXPECT_EQ(HeaderText(*panels[i]).find(", burst 8") != std::string::npos, bucket) << i;
  }
}

TEST(ComparePicture, DrawsWhatEachAlgorithmCounts) {
  const XmlElement boundary = Draw(AllAlgorithms(), ExampleTrace("boundary.txt"));
  const auto panels = boundary.WithClass("panel");
  ASSERT_EQ(panels.size(), 6u);
  const auto has = [](const XmlElement* panel, std::string_view what) {
    return !panel->WithClass(what).empty();
  };
  for (size_t i = 0; i < panels.size(); ++i) {
    const Algorithm a = kAllAlgorithms[i];
    SCOPED_TRACE(AlgorithmName(a));
    EXPECT_EQ(has(panels[i], "windows"),
              a == Algorithm::kFixedWindow || a == Algorithm::kSlidingWindow);
    EXPECT_EQ(has(panels[i], "span"),
              a == Algorithm::kSlidingLog || a == Algorithm::kSlidingWindow);
    EXPECT_EQ(has(panels[i], "bucket"), IsMeter(a));
    EXPECT_TRUE(has(panels[i], "remaining"));
  }
  // The span ends at the last denial; with none, there is no span.
  const XmlElement trickle = Draw(AllAlgorithms(), ExampleTrace("trickle.txt"));
  EXPECT_TRUE(trickle.WithClass("panel")[1]->WithClass("span").empty());
}

TEST(Picture, TitleIsEscaped) {
  const Limit limit = FivePerTenSeconds(Algorithm::kFixedWindow);
  const XmlElement root =
      Draw({&limit, 1}, "0\n", Duration(0), "<b>Tom & \"Jerry\"</b> \x01 at 5 µs\xff");
  const auto headlines = root.WithClass("headline");
  ASSERT_EQ(headlines.size(), 1u);
  EXPECT_EQ(headlines[0]->text, "<b>Tom & \"Jerry\"</b> \xEF\xBF\xBD at 5 µs\xEF\xBF\xBD");
  EXPECT_EQ(root.children.at(0).name, "title");
  EXPECT_EQ(root.children.at(0).text, headlines[0]->text);
}

TEST(Picture, RefusesWhatTheCsvRefusesAndDrawsNothing) {
  const auto refuse = [](const Limit& limit, const std::string& trace, Duration max_wait) {
    std::istringstream in(trace);
    std::string svg = "left over";
    std::ostringstream err;
    EXPECT_EQ(SimulatePicture({&limit, 1}, in, "t", svg, err, max_wait), 2);
    EXPECT_EQ(svg, "");
    return err.str();
  };
  const Limit gcra = FivePerTenSeconds(Algorithm::kGcra);
  EXPECT_EQ(refuse(gcra, "0\n5 x\n", Duration(0)),
            "trace line 2: expected a cost (a whole number >= 0), got 'x'\n");
  EXPECT_EQ(refuse(gcra, "10\n5\n", Duration(0)), "trace line 2: time 5 goes back before 10\n");
  EXPECT_NE(refuse(gcra, "0\n0 6\n", Duration(0)).find("trace line 2: cost 6 exceeds"),
            std::string::npos);
  EXPECT_EQ(refuse(FivePerTenSeconds(Algorithm::kSlidingLog), "0\n", std::chrono::seconds(1)),
            "--max-wait needs token_bucket, leaky_bucket or gcra, not sliding_log\n");
}

// A peek sees what could be admitted at its instant, before the requests of that instant.
TEST(RunSimulation, PeeksSeeTheAllowance) {
  const Limit limit = FivePerTenSeconds(Algorithm::kTokenBucket);  // a token every 2 s
  std::istringstream in("0 5\n");
  const int64_t peeks[] = {0, 1999, 2000, 9999, 10000, 12000};
  const Simulation run = RunSimulation(limit, ReadTrace(in), Duration(0), peeks);
  EXPECT_EQ(run.error, "");
  std::vector<std::pair<int64_t, int64_t>> allowance;
  for (const Allowance& a : run.allowance) allowance.emplace_back(a.t_ms, a.remaining);
  EXPECT_EQ(allowance,
            (std::vector<std::pair<int64_t, int64_t>>{
                {0, 5}, {0, 0}, {1999, 0}, {2000, 1}, {9999, 4}, {10000, 5}, {12000, 5}}));
}

// The pictures peek between requests to draw the allowance; the decisions must be the CSV's.
TEST(RunSimulation, PeeksChangeNoDecision) {
  std::vector<int64_t> every_millisecond(35'001);
  for (size_t t = 0; t < every_millisecond.size(); ++t) every_millisecond[t] = t;
  for (const char* name : kExampleTraces) {
    std::istringstream in(ExampleTrace(name));
    const Trace trace = ReadTrace(in);
    for (const Limit& limit : AllAlgorithms()) {
      SCOPED_TRACE(std::string(name) + " " + std::string(AlgorithmName(limit.algorithm())));
      const Simulation plain = RunSimulation(limit, trace);
      const Simulation peeked = RunSimulation(limit, trace, Duration(0), every_millisecond);
      ASSERT_EQ(plain.requests.size(), trace.requests.size());
      ASSERT_EQ(peeked.requests.size(), plain.requests.size());
      for (size_t i = 0; i < plain.requests.size(); ++i) {
        EXPECT_EQ(peeked.requests[i].decision, plain.requests[i].decision) << i;
      }
      EXPECT_EQ(peeked.allowance.size(), plain.requests.size() + every_millisecond.size());
    }
  }
}

TEST(AllowanceSampleTimes, SpanTheTimeAxisToAboutTwoPixels) {
  std::istringstream in(ExampleTrace("burst.txt"));  // the last request at 20 s
  const Trace trace = ReadTrace(in);
  for (const Duration max_wait : {Duration(0), Duration(std::chrono::seconds(5))}) {
    const std::vector<int64_t> times = AllowanceSampleTimes(trace, max_wait);
    ASSERT_GE(times.size(), 2u);
    EXPECT_EQ(times.front(), 0);
    EXPECT_GE(times.back(), 20'000 + max_wait.count() / 1000);
    EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
    EXPECT_GE(times.size(), 300u);  // the plot is 796 px wide
    EXPECT_LE(times.size(), 500u);
  }
}

}  // namespace
}  // namespace sluice::simulate
