// `sluice simulate --svg` as a user runs it: the binary writes a well-formed picture whose marks
// say what its CSV says, --compare draws six panels, and bad flags exit 2 with a clear message
// and write nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "simulate/xml_document.h"
#include "sluice/limit.h"

namespace sluice::testing {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class SimulateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice-simulate-cli-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `sluice simulate <args>`; the arguments are trusted text of the test, quoted by the caller.
  Outcome Simulate(const std::string& args) const {
    const fs::path err_path = dir_ / "stderr";
    const std::string command =
        std::string(SLUICE_BINARY) + " simulate " + args + " 2>" + err_path.string();
    Outcome outcome;
    FILE* out = popen(command.c_str(), "r");
    if (out == nullptr) {
      ADD_FAILURE() << "cannot run " << command;
      return outcome;
    }
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof(buffer), out)) > 0;) outcome.out.append(buffer, n);
    const int status = pclose(out);
    outcome.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    outcome.err = ReadFile(err_path);
    return outcome;
  }

  fs::path dir_;
};

const std::string kBurst = std::string(SLUICE_TRACES_DIR) + "/burst.txt";
const std::string kLimit = "--limit 5 --period 10s --trace " + kBurst;

// The allowed column of the CSV, as "admitted"/"denied".
std::vector<std::string> CsvOutcomes(const std::string& csv) {
  std::istringstream rows(csv);
  std::string row;
  std::getline(rows, row);
  EXPECT_EQ(row, "t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms");
  std::vector<std::string> outcomes;
  while (std::getline(rows, row)) {
    outcomes.push_back(row.find(",true,") != std::string::npos ? "admitted" : "denied");
  }
  return outcomes;
}

std::vector<std::string> MarkOutcomes(const XmlElement& panel) {
  std::vector<std::string> outcomes;
  for (const XmlElement* mark : panel.FindAll(
           [](const XmlElement& e) { return e.HasClass("admitted") || e.HasClass("denied"); })) {
    outcomes.push_back(mark->HasClass("admitted") ? "admitted" : "denied");
  }
  return outcomes;
}

TEST_F(SimulateCli, SvgWritesAPictureOfWhatTheCsvSays) {
  const Outcome csv = Simulate("--algorithm fixed_window " + kLimit);
  ASSERT_EQ(csv.code, 0) << csv.err;

  const fs::path file = dir_ / "picture.svg";
  const Outcome drawn = Simulate("--algorithm fixed_window " + kLimit + " --svg " + file.string());
  ASSERT_EQ(drawn.code, 0) << drawn.err;
  EXPECT_EQ(drawn.out, "");  // the picture replaces the CSV
  EXPECT_EQ(drawn.err, "");
  auto root = ReadXml(ReadFile(file));
  ASSERT_TRUE(root.ok()) << root.status().message();
  const auto panels = root->WithClass("panel");
  ASSERT_EQ(panels.size(), 1u);
  EXPECT_EQ(MarkOutcomes(*panels[0]), CsvOutcomes(csv.out));
  EXPECT_EQ(root->WithClass("headline").at(0)->text, "Trace " + kBurst);

  const Outcome to_stdout =
      Simulate("--algorithm fixed_window " + kLimit + " --svg - --title 'A burst & more'");
  ASSERT_EQ(to_stdout.code, 0) << to_stdout.err;
  auto from_stdout = ReadXml(to_stdout.out);
  ASSERT_TRUE(from_stdout.ok()) << from_stdout.status().message();
  EXPECT_EQ(from_stdout->WithClass("headline").at(0)->text, "A burst & more");
  EXPECT_EQ(MarkOutcomes(*from_stdout), CsvOutcomes(csv.out));
}

TEST_F(SimulateCli, CompareDrawsEveryAlgorithmWithItsCsv) {
  const fs::path file = dir_ / "compare.svg";
  const Outcome drawn = Simulate(kLimit + " --burst 3 --compare --svg " + file.string());
  ASSERT_EQ(drawn.code, 0) << drawn.err;
  auto root = ReadXml(ReadFile(file));
  ASSERT_TRUE(root.ok()) << root.status().message();
  const auto panels = root->WithClass("panel");
  ASSERT_EQ(panels.size(), std::size(kAllAlgorithms));
  for (size_t i = 0; i < panels.size(); ++i) {
    const std::string algorithm(AlgorithmName(kAllAlgorithms[i]));
    // --burst goes to the algorithms that have one.
    const Outcome csv = Simulate("--algorithm " + algorithm + " " + kLimit +
                                 (IsMeter(kAllAlgorithms[i]) ? " --burst 3" : ""));
    ASSERT_EQ(csv.code, 0) << csv.err;
    EXPECT_EQ(panels[i]->Attribute("data-algorithm"), algorithm);
    EXPECT_EQ(MarkOutcomes(*panels[i]), CsvOutcomes(csv.out)) << algorithm;
  }
}

TEST_F(SimulateCli, BadFlagsExit2WithAMessageAndWriteNothing) {
  const std::string file = (dir_ / "never.svg").string();
  const fs::path bad_trace = dir_ / "bad.txt";
  std::ofstream(bad_trace) << "0\nnot-a-time\n";
  const struct {
    std::string args, message;
  } cases[] = {
      {kLimit + " --compare", "--compare requires --svg"},
      {kLimit + " --compare --algorithm gcra --svg " + file, "excludes --compare"},
      {kLimit + " --compare --max-wait 1s --svg " + file, "excludes --compare"},
      {kLimit + " --title x", "--title requires --svg"},
      {kLimit + " --svg ''", "--svg: expected a file name, or '-' for stdout"},
      {kLimit + " --svg " + (dir_ / "no-such-dir" / "x.svg").string(),
       "sluice: cannot write SVG file '" + (dir_ / "no-such-dir" / "x.svg").string() + "'"},
      {kLimit + " --compare --burst 0 --svg " + file,
       "sluice: token_bucket: burst must be positive"},
      {kLimit + " --algorithm sliding_log --max-wait 1s --svg " + file,
       "--max-wait needs token_bucket, leaky_bucket or gcra, not sliding_log"},
      {"--limit 5 --period 10s --trace " + (dir_ / "missing.txt").string() + " --svg " + file,
       "sluice: cannot open trace file"},
      {"--limit 5 --period 10s --trace " + bad_trace.string() + " --compare --svg " + file,
       "trace line 2: expected a time in milliseconds"},
  };
  for (const auto& c : cases) {
    const Outcome outcome = Simulate(c.args);
    EXPECT_EQ(outcome.code, 2) << c.args << "\n" << outcome.err;
    EXPECT_NE(outcome.err.find(c.message), std::string::npos) << c.args << "\n" << outcome.err;
    EXPECT_EQ(outcome.out, "") << c.args;
    EXPECT_FALSE(fs::exists(file)) << c.args;
  }
}

}  // namespace
}  // namespace sluice::testing
