#include "simulate/simulate.h"

#include <gtest/gtest.h>

#include <sstream>

namespace sluice::simulate {
namespace {

struct Outcome {
  int code;
  std::string out, err;
};

Outcome RunTrace(Algorithm a, const std::string& trace, int64_t count = 2) {
  auto limit = Limit::Create(a, count, std::chrono::seconds(10));
  EXPECT_TRUE(limit.ok());
  std::istringstream in(trace);
  std::ostringstream out, err;
  const int code = Simulate(*limit, in, out, err);
  return {code, out.str(), err.str()};
}

TEST(Simulate, PrintsOneRowPerRequest) {
  const Outcome run = RunTrace(Algorithm::kFixedWindow, "# comment\n0\n0 1\n\n0\n10000 2\n");
  EXPECT_EQ(run.code, 0);
  EXPECT_EQ(run.out,
            "t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms\n"
            "0,1,true,1,0,10000\n"
            "0,1,true,0,0,10000\n"
            "0,1,false,0,10000,10000\n"
            "10000,2,true,0,0,10000\n");
  EXPECT_EQ(run.err, "");
}

// Microsecond waits are printed rounded up to whole milliseconds, never early: 3 per 10 s is one
// unit per 3 333 334 µs.
TEST(Simulate, WaitsAreRoundedUpToTheMillisecond) {
  const Outcome run = RunTrace(Algorithm::kGcra, "0 3\n0\n3334 0\n", 3);
  EXPECT_EQ(run.code, 0);
  EXPECT_EQ(run.out,
            "t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms\n"
            "0,3,true,0,0,10001\n"
            "0,1,false,0,3334,10001\n"
            "3334,0,true,1,0,6667\n");
}

// With a max_wait the excess books slots instead of being refused: on 1 per second with a burst
// of 1 and 2 s of wait, three requests at 0 proceed at 0, 1 s and 2 s, the fourth would wait 3 s
// and is refused (booked 1 s later, it would fit), and one at 1.5 s books the slot at 3 s.
TEST(Simulate, MaxWaitBooksSlotsAndPrintsTheDelay) {
  auto limit = Limit::Create(Algorithm::kGcra, 1, std::chrono::seconds(1), 1);
  ASSERT_TRUE(limit.ok());
  std::istringstream in("0\n0\n0\n0\n1500\n");
  std::ostringstream out, err;
  EXPECT_EQ(Simulate(*limit, in, out, err, std::chrono::seconds(2)), 0);
  EXPECT_EQ(out.str(),
            "t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms\n"
            "0,1,true,0,0,1000,0\n"
            "0,1,true,0,0,2000,1000\n"
            "0,1,true,0,0,3000,2000\n"
            "0,1,false,0,1000,3000,0\n"
            "1500,1,true,0,0,2500,1500\n");
  EXPECT_EQ(err.str(), "");
}

TEST(Simulate, MaxWaitNeedsAnAlgorithmThatBooks) {
  auto limit = Limit::Create(Algorithm::kSlidingLog, 1, std::chrono::seconds(1));
  ASSERT_TRUE(limit.ok());
  std::istringstream in("0\n");
  std::ostringstream out, err;
  EXPECT_EQ(Simulate(*limit, in, out, err, std::chrono::seconds(2)), 2);
  EXPECT_EQ(err.str(), "--max-wait needs token_bucket, leaky_bucket or gcra, not sliding_log\n");
  EXPECT_EQ(out.str(), "");
}

TEST(Simulate, BadLinesAreNamedAndExit2) {
  Outcome run = RunTrace(Algorithm::kGcra, "0\n5 x\n");
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err, "trace line 2: expected a cost (a whole number >= 0), got 'x'\n");

  run = RunTrace(Algorithm::kGcra, "10\n5\n");
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err, "trace line 2: time 5 goes back before 10\n");
  // The rows before the bad line were printed.
  EXPECT_EQ(run.out,
            "t_ms,cost,allowed,remaining,retry_after_ms,reset_after_ms\n10,1,true,1,0,5000\n");

  run = RunTrace(Algorithm::kSlidingLog, "# header\n\n-5\n");
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err,
            "trace line 3: expected a time in milliseconds (a whole number >= 0), got '-5'\n");

  run = RunTrace(Algorithm::kFixedWindow, "1.5\n");
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("trace line 1: expected a time"), std::string::npos);

  run = RunTrace(Algorithm::kGcra, "0 3\n");
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("trace line 1: cost 3 exceeds the capacity 2"), std::string::npos);

  run = RunTrace(Algorithm::kGcra, "0 1 2\n");
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err, "trace line 1: unexpected '2' after the cost\n");
}

}  // namespace
}  // namespace sluice::simulate
